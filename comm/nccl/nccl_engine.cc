// The nccl engine's entry in the launch registry (comm/engine.h): one
// thread per local GPU (comm::NcclLocalLauncher, direct device buffers), or
// one process per GPU under tandemrun (comm::NcclStoreLauncher); auto's
// choice when a CUDA device is visible. Each rank's collectives are ordered
// after RunOptions::compute_stream (train: the rank thread's tensor stream).
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/cuda_stream.h"
#include "comm/engine.h"
#include "comm/launch_env.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/nccl_launcher.h"
#include "comm/nccl/nccl_store_launcher.h"

namespace tandem::comm {
namespace {

Engine NcclEngine() {
  Engine e;
  e.name = "nccl";
  e.description =
      "one thread per local GPU; one process per GPU under tandemrun";
  e.launchers = {"torchrun"};
  e.auto_order = 1;
  e.auto_picks = [](const LaunchContext& here) { return here.gpu_count > 0; };
  e.default_world_size = [](const LaunchContext& here) {
    return here.under_torchrun() ? here.launched_world_size() : here.gpu_count;
  };
  e.available = [](int world_size, const LaunchContext& here) -> absl::Status {
    if (here.gpu_count == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "needs a CUDA device, and none was found (", here.no_gpu_reason,
          "). Run on the CPU instead: --backend=sim (ranks as threads in "
          "this process) or, for real processes, mpirun -np N <binary> "
          "--backend=mpi"));
    }
    if (here.under_torchrun()) {
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
  e.make_launcher = [](const RunOptions& options) -> std::unique_ptr<Launcher> {
    NcclOptions nccl_options;
    nccl_options.timeout = options.timeout;
    NcclRankSetup setup;
    setup.stage_host_buffers = false;
    // Each rank's thread has its device current. Its device work (train:
    // its tensor ops) goes to its compute stream there; its collectives
    // must start after them.
    if (options.compute_stream) {
      setup.prepare = [compute_stream = options.compute_stream](
                          NcclCommunicator& comm) -> absl::Status {
        absl::StatusOr<CudaStreamHandle> stream =
            compute_stream(comm.device().ordinal);
        if (!stream.ok()) return stream.status();
        comm.set_compute_stream(*stream);
        return absl::OkStatus();
      };
    }
    absl::StatusOr<std::optional<LaunchEnv>> env = DetectLaunchEnv();
    if (env.ok() && env->has_value() && (*env)->launcher == "torchrun") {
      return std::make_unique<NcclStoreLauncher>(nccl_options, setup);
    }
    return std::make_unique<NcclLocalLauncher>(nccl_options, setup);
  };
  return e;
}

TANDEM_REGISTER_ENGINE(30, NcclEngine);

}  // namespace
}  // namespace tandem::comm
