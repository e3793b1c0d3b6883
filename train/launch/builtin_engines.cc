#include "train/launch/builtin_engines.h"

#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_launcher.h"
#include "comm/launch_env.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/mpi/mpi_launcher.h"
#include "comm/nccl/cuda_probe.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_launcher.h"
#include "comm/nccl/nccl_store_launcher.h"
#include "sim/sim_launcher.h"
#include "tensor/cuda/cuda.h"

namespace tandem::train {
namespace {

// Started by mpirun or srun (not torchrun): the processes are MPI ranks.
bool UnderMpiLauncher(const LaunchContext& here) {
  return here.launch.has_value() && here.launch->launcher != "torchrun";
}

Engine SimEngine() {
  Engine e;
  e.name = "sim";
  e.description = "ranks as threads in this process";
  e.auto_order = 2;
  e.auto_picks = [](const LaunchContext&) { return true; };
  e.default_world_size = [](const LaunchContext& here) {
    return here.gpu_count > 0 ? here.gpu_count : 2;
  };
  e.available = [](int world_size, const LaunchContext&) {
    return sim::SimLauncher().CanRun(world_size);
  };
  e.make_launcher = [](const RunOptions& options) {
    sim::Options sim_options;
    sim_options.timeout = options.timeout;
    sim_options.stall_note_interval = options.stall_note_interval;
    if (options.spin.has_value()) sim_options.spin = *options.spin;
    if (options.sim_fibers) sim_options.ranks = sim::RankExecution::kFibers;
    if (options.sim_stack_bytes > 0) {
      sim_options.stack_bytes = options.sim_stack_bytes;
    }
    return std::make_unique<sim::SimLauncher>(sim_options);
  };
  return e;
}

Engine MpiEngine() {
  Engine e;
  e.name = "mpi";
  e.description = "one process per rank, under mpirun or srun";
  e.joins_launched_world = true;
  e.launchers = {"OpenMPI", "Slurm"};
  e.auto_order = 0;
  e.auto_picks = [](const LaunchContext& here) {
    return UnderMpiLauncher(here) && here.launched_world_size() > 1;
  };
  e.default_world_size = [](const LaunchContext& here) {
    return UnderMpiLauncher(here) ? here.launched_world_size() : 1;
  };
  e.available = [](int world_size, const LaunchContext& here) -> absl::Status {
    if (!UnderMpiLauncher(here) && here.launched_world_size() > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mpi joins jobs started by mpirun or srun, and this process was "
          "started by ",
          here.launch->launcher, " (WORLD_SIZE=", here.launched_world_size(),
          "); start the job with mpirun -np ", here.launched_world_size(),
          " <binary> --backend=mpi"));
    }
    const int job = UnderMpiLauncher(here) ? here.launched_world_size() : 1;
    if (world_size != job) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the MPI job has ", job, " rank(s); start it with mpirun -np ",
          world_size, " (or drop --world_size)"));
    }
    return absl::OkStatus();
  };
  e.make_launcher = [](const RunOptions& options) {
    comm::MpiOptions mpi_options;
    mpi_options.timeout = options.timeout;
    mpi_options.stall_note_interval = options.stall_note_interval;
    return std::make_unique<comm::MpiLauncher>(mpi_options);
  };
  // The other processes would wait for this rank's collectives until their
  // timeout: say why, then end the whole job now, as mpirun users expect.
  e.on_rank_error = [](const comm::RankStatus& rs) {
    std::fprintf(stderr, "rank %d: %s\nrank %d: aborting the MPI job\n",
                 rs.rank, rs.status.ToString().c_str(), rs.rank);
    std::fflush(stderr);
    comm::MpiAbort(1);
  };
  return e;
}

// Started by torchrun or tandemrun: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT.
bool UnderTorchrun(const LaunchContext& here) {
  return here.launch.has_value() && here.launch->launcher == "torchrun";
}

// Descriptors a gloo rank needs besides its peers' sockets (store, files).
constexpr int64_t kGlooOwnFds = 64;

Engine GlooEngine() {
  Engine e;
  e.name = "gloo";
  e.description = "one process per rank, under tandemrun or torchrun";
  e.joins_launched_world = true;
  e.launchers = {"torchrun"};
  e.auto_order = 0;
  // Under tandemrun with GPUs, auto picks nccl (one process per GPU).
  e.auto_picks = [](const LaunchContext& here) {
    return UnderTorchrun(here) && here.launched_world_size() > 1 &&
           here.gpu_count == 0;
  };
  e.default_world_size = [](const LaunchContext& here) {
    return UnderTorchrun(here) ? here.launched_world_size() : 1;
  };
  e.available = [](int world_size, const LaunchContext& here) -> absl::Status {
    if (!UnderTorchrun(here)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gloo joins jobs started by tandemrun or torchrun, and this "
          "process was ",
          here.launch.has_value()
              ? absl::StrCat("started by ", here.launch->launcher)
              : std::string("started alone"),
          "; start the job with tandemrun --nproc_per_node=N -- <binary> "
          "--backend=gloo"));
    }
    if (here.launch->master_addr.empty() || here.launch->master_port == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gloo needs MASTER_ADDR and MASTER_PORT (where the ranks meet) "
          "besides RANK and WORLD_SIZE, and found MASTER_ADDR='",
          here.launch->master_addr, "' MASTER_PORT=", here.launch->master_port,
          "; start the job with tandemrun --nproc_per_node=",
          here.launched_world_size(), " -- <binary>, which sets them all"));
    }
    // Gloo connects every rank to every other: a socket per peer in each
    // process. Refused before any allocation or rendezvous of that size.
    rlimit files = {};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
        files.rlim_cur != RLIM_INFINITY &&
        static_cast<int64_t>(here.launched_world_size()) + kGlooOwnFds >
            static_cast<int64_t>(files.rlim_cur)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WORLD_SIZE=", here.launched_world_size(),
          " cannot run here: gloo connects every rank to every other (a "
          "socket per peer), and the open-file limit (ulimit -n = ",
          files.rlim_cur, ") allows at most ",
          static_cast<int64_t>(files.rlim_cur) - kGlooOwnFds,
          " ranks; start fewer ranks or raise the limit"));
    }
    if (world_size != here.launched_world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the tandemrun job has ", here.launched_world_size(),
          " rank(s) (WORLD_SIZE); start it with tandemrun --nproc_per_node=",
          world_size, " (or drop --world_size)"));
    }
    return absl::OkStatus();
  };
  e.make_launcher = [](const RunOptions& options) {
    return std::make_unique<comm::GlooLauncher>(options.timeout);
  };
  return e;
}

Engine NcclEngine() {
  Engine e;
  e.name = "nccl";
  e.description =
      "one thread per local GPU; one process per GPU under tandemrun";
  e.launchers = {"torchrun"};
  e.auto_order = 1;
  e.auto_picks = [](const LaunchContext& here) { return here.gpu_count > 0; };
  e.default_world_size = [](const LaunchContext& here) {
    return UnderTorchrun(here) ? here.launched_world_size() : here.gpu_count;
  };
  e.available = [](int world_size, const LaunchContext& here) -> absl::Status {
    if (here.gpu_count == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "needs a CUDA device, and none was found (", here.no_gpu_reason,
          "). Run on the CPU instead: --backend=sim (ranks as threads in "
          "this process) or, for real processes, mpirun -np N <binary> "
          "--backend=mpi"));
    }
    if (UnderTorchrun(here)) {
      const int local = here.launch->local_world_size > 0
                            ? here.launch->local_world_size
                            : here.launched_world_size();
      if (world_size != here.launched_world_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("the tandemrun job has ", here.launched_world_size(),
                         " rank(s) (WORLD_SIZE); start it with tandemrun "
                         "--nproc_per_node=",
                         world_size, " (or drop --world_size)"));
      }
      if (local > here.gpu_count) {
        return absl::InvalidArgumentError(absl::StrCat(
            local, " processes share this node (LOCAL_WORLD_SIZE) but only ",
            here.gpu_count,
            " CUDA device(s) are visible; start tandemrun with "
            "--nproc_per_node=",
            here.gpu_count));
      }
      return absl::OkStatus();
    }
    if (world_size > here.gpu_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("only ", here.gpu_count,
                       " CUDA device(s) are visible (CUDA_VISIBLE_DEVICES)"));
    }
    return absl::OkStatus();
  };
  e.make_launcher =
      [](const RunOptions& options) -> std::unique_ptr<comm::Launcher> {
    comm::NcclOptions nccl_options;
    nccl_options.timeout = options.timeout;
    comm::NcclRankSetup setup;
    setup.stage_host_buffers = false;
    // Each rank's thread has its device current. Its tensor ops go to its
    // current stream there; its collectives must start after them.
    setup.prepare = [](comm::NcclCommunicator& comm) -> absl::Status {
      absl::StatusOr<CudaStreamHandle> stream =
          cuda::CurrentStream(comm.device().ordinal);
      if (!stream.ok()) return stream.status();
      comm.set_compute_stream(*stream);
      return absl::OkStatus();
    };
    absl::StatusOr<std::optional<comm::LaunchEnv>> env =
        comm::DetectLaunchEnv();
    if (env.ok() && env->has_value() && (*env)->launcher == "torchrun") {
      return std::make_unique<comm::NcclStoreLauncher>(nccl_options, setup);
    }
    return std::make_unique<comm::NcclLocalLauncher>(nccl_options, setup);
  };
  return e;
}

}  // namespace

absl::StatusOr<LaunchContext> DetectLaunchContext() {
  LaunchContext here;
  absl::StatusOr<std::optional<comm::LaunchEnv>> env = comm::DetectLaunchEnv();
  if (!env.ok()) return env.status();
  here.launch = *env;
  absl::StatusOr<comm::CudaProbe> probe = comm::ProbeCuda();
  if (probe.ok()) {
    here.gpu_count = probe->device_count;
    here.no_gpu_reason = probe->no_device_reason;
  } else {
    here.no_gpu_reason = std::string(probe.status().message());
  }
  return here;
}

LaunchRegistry BuiltinEngines() {
  LaunchRegistry registry;
  // Distinct names and complete entries: Add cannot fail here.
  for (Engine e : {SimEngine(), MpiEngine(), NcclEngine(), GlooEngine()}) {
    absl::Status s = registry.Add(std::move(e));
    (void)s;
  }
  return registry;
}

}  // namespace tandem::train
