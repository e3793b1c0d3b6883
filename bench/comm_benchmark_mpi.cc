// comm_benchmark_mpi: the nccl-tests all-reduce table for tandem's MPI
// backend (comm::MpiCommunicator), one process per rank under mpirun; the
// counterpart of //bench:comm_benchmark (sim backend) and of the raw-OpenMPI
// peer //bench:mpi_allreduce_peer, timed the same way so the three tables
// line up.
//
//   mpirun --oversubscribe -np 2 bazel-bin/bench/comm_benchmark_mpi
//       --min_bytes=8 --max_bytes=268435456
//
// (In containers without ptrace rights export
// OMPI_MCA_btl_vader_single_copy_mechanism=none first; bench/compare probes
// whether CMA single-copy works and falls back to that when it does not.)
//
// Timing, as nccl-tests and the peers: per size, one warm-up operation, a
// two-operation probe that sets the iteration count for about
// --target_seconds of work (the same count on every rank: the probe is
// max-reduced), then `iters` back-to-back operations (issue + Wait) between
// barriers; the time of one operation is the slowest rank's elapsed / iters.
// The result is then checked with exact values (rank r contributes
// r * 8 + i % 7 at element i) and wrong elements, summed over ranks, are
// printed in #wrong.
//
// --engine=iallreduce_wait / iallreduce_spin bypass MpiCommunicator (plain
// MPI_Iallreduce, then MPI_Wait or an MPI_Test loop) to tell the backend's
// waiting policy apart from OpenMPI's nonblocking algorithms (libnbc; try
// OMPI_MCA_coll_libnbc_iallreduce_algorithm=1 for ring).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/allreduce_sweep.h"
#include "bench/flag_checks.h"
#include "comm/bandwidth.h"
#include "comm/communicator.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/types.h"

ABSL_FLAG(int64_t, min_bytes, 8, "Smallest size S, bytes (f32 elements x 4).");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20, "Largest size S, bytes.");
ABSL_FLAG(double, target_seconds, 0.2,
          "Aim for about this much timed work per size (sets the iterations).");
ABSL_FLAG(double, warmup_seconds, 1,
          "Before the first size, run it untimed for this many seconds (0: "
          "none), as bench/comm_benchmark does.");
ABSL_FLAG(std::string, engine, "tandem",
          "tandem: comm::MpiCommunicator (issue + Work::Wait). Diagnostics "
          "that bypass it, to tell its waiting policy from OpenMPI's "
          "nonblocking algorithms: iallreduce_wait (MPI_Iallreduce + "
          "MPI_Wait), iallreduce_spin (MPI_Iallreduce + MPI_Test in a busy "
          "loop).");

ABSL_FLAG(bool, check_collectives, true,
          "MpiOptions::check_collectives: exchange every collective's "
          "fingerprint before its data moves (TANDEM_DISTRIBUTED_DEBUG=DETAIL "
          "or OFF overrides).");

namespace tandem {
namespace {

using comm::DType;
using comm::ReduceOp;

absl::Status AllReduceOnce(comm::Communicator& comm, std::vector<float>& buf,
                           int64_t count) {
  const std::string& engine = absl::GetFlag(FLAGS_engine);
  if (engine == "tandem") {
    return comm
        .AllReduce(comm::HostView(buf.data(), count, DType::kF32),
                   ReduceOp::kSum)
        ->Wait();
  }
  MPI_Request request;
  if (MPI_Iallreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count),
                     MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                     &request) != MPI_SUCCESS) {
    return absl::InternalError("MPI_Iallreduce failed");
  }
  if (engine == "iallreduce_wait") {
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    return absl::OkStatus();
  }
  int done = 0;
  while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  return absl::OkStatus();
}

absl::Status Run(comm::Communicator& comm) {
  const std::string title = absl::StrCat(
      "# tandem MpiCommunicator AllReduce, ", comm.size(),
      " processes, f32, sum",
      absl::GetFlag(FLAGS_engine) == "tandem"
          ? (comm::CheckCollectivesEnabled(
                 {.check_collectives = absl::GetFlag(FLAGS_check_collectives)})
                 ? ", collective check on"
                 : ", collective check off")
          : absl::StrCat(" (engine ", absl::GetFlag(FLAGS_engine),
                         ": bypasses MpiCommunicator)"));
  bench::AllReduceSweep sweep;
  sweep.min_bytes = absl::GetFlag(FLAGS_min_bytes);
  sweep.max_bytes = absl::GetFlag(FLAGS_max_bytes);
  sweep.target_seconds = absl::GetFlag(FLAGS_target_seconds);
  sweep.warmup_seconds = absl::GetFlag(FLAGS_warmup_seconds);
  sweep.title = title;
  sweep.once = [&comm](std::vector<float>& buf, int64_t count) {
    return AllReduceOnce(comm, buf, count);
  };
  return bench::RunAllReduceSweep(comm, sweep);
}

}  // namespace
}  // namespace tandem

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  // Parsed before MPI starts: every rank exits 2 alike on a usage error.
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "comm_benchmark_mpi",
           .summary =
               "Times tandem's MPI backend all-reduce (f32 sum) and prints the "
               "nccl-tests table. Run under mpirun.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  const std::string engine = absl::GetFlag(FLAGS_engine);
  if (engine != "tandem" && engine != "iallreduce_wait" &&
      engine != "iallreduce_spin") {
    std::fprintf(stderr,
                 "comm_benchmark_mpi: --engine must be tandem, "
                 "iallreduce_wait or iallreduce_spin, found '%s'\n",
                 engine.c_str());
    return 2;
  }
  // Before MPI starts: every rank checks the same flags and exits 2 alike.
  // One buffer of max_bytes per process (several processes may share the
  // machine: each is checked alone).
  absl::Status flags = tandem::bench::CheckSizeSweep(
      absl::GetFlag(FLAGS_min_bytes), absl::GetFlag(FLAGS_max_bytes), 1,
      absl::GetFlag(FLAGS_target_seconds));
  if (flags.ok()) {
    flags =
        tandem::bench::CheckWarmUpSeconds(absl::GetFlag(FLAGS_warmup_seconds));
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "comm_benchmark_mpi: %s\n",
                 std::string(flags.message()).c_str());
    return 2;
  }
  tandem::comm::MpiOptions options;
  options.check_collectives = absl::GetFlag(FLAGS_check_collectives);
  absl::StatusOr<std::unique_ptr<tandem::comm::MpiCommunicator>> comm =
      tandem::comm::MpiCommunicator::Create(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "comm_benchmark_mpi: %s\n",
                 comm.status().ToString().c_str());
    return 1;
  }
  if (absl::Status s = tandem::Run(**comm); !s.ok()) {
    std::fprintf(stderr, "comm_benchmark_mpi on rank %d: %s\n", (*comm)->rank(),
                 s.ToString().c_str());
    tandem::comm::MpiAbort(1);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("comm_benchmark_mpi")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("comm_benchmark_mpi", Run(argc, argv));
}
