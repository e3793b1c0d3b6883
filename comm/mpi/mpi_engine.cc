// The mpi engine's entry in the launch registry (comm/engine.h): this
// process is one rank of a job started by mpirun or srun; auto's choice
// there with more than one rank.
#include <cstdio>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/engine.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_launcher.h"

namespace tandem::comm {
namespace {

Engine MpiEngine() {
  Engine e;
  e.name = "mpi";
  e.description = "one process per rank, under mpirun or srun";
  e.joins_launched_world = true;
  e.launchers = {"OpenMPI", "Slurm"};
  e.auto_order = 0;
  e.auto_picks = [](const LaunchContext& here) {
    return here.under_mpi_launcher() && here.launched_world_size() > 1;
  };
  e.default_world_size = [](const LaunchContext& here) {
    return here.under_mpi_launcher() ? here.launched_world_size() : 1;
  };
  e.available = [](int world_size, const LaunchContext& here) -> absl::Status {
    if (!here.under_mpi_launcher() && here.launched_world_size() > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mpi joins jobs started by mpirun or srun, and this process was "
          "started by ",
          here.launch->launcher, " (WORLD_SIZE=", here.launched_world_size(),
          "); start the job with mpirun -np ", here.launched_world_size(),
          " <binary> --backend=mpi"));
    }
    const int job = here.under_mpi_launcher() ? here.launched_world_size() : 1;
    if (world_size != job) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the MPI job has ", job, " rank(s); start it with mpirun -np ",
          world_size, " (or drop --world_size)"));
    }
    return absl::OkStatus();
  };
  e.make_launcher = [](const RunOptions& options) {
    MpiOptions mpi_options;
    mpi_options.timeout = options.timeout;
    mpi_options.stall_note_interval = options.stall_note_interval;
    return std::make_unique<MpiLauncher>(mpi_options);
  };
  // The other processes would wait for this rank's collectives until their
  // timeout: say why, then end the whole job now, as mpirun users expect.
  e.on_rank_error = [](const RankStatus& rs) {
    std::fprintf(stderr, "rank %d: %s\nrank %d: aborting the MPI job\n",
                 rs.rank, rs.status.ToString().c_str(), rs.rank);
    std::fflush(stderr);
    MpiAbort(1);
  };
  return e;
}

TANDEM_REGISTER_ENGINE(20, MpiEngine);

}  // namespace
}  // namespace tandem::comm
