#include "train/launch/backend.h"

#include <cstdio>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "comm/launch_env.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/nccl/cuda_probe.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/nccl_communicator.h"
#include "sim/sim.h"
#include "tensor/cuda/cuda.h"

namespace tandem::train {
namespace {

int GpuCount() {
  absl::StatusOr<comm::CudaProbe> probe = comm::ProbeCuda();
  return probe.ok() ? probe->device_count : 0;
}

std::string NoGpuMessage() {
  absl::StatusOr<comm::CudaProbe> probe = comm::ProbeCuda();
  std::string reason = probe.ok() ? probe->no_device_reason
                                  : std::string(probe.status().message());
  return absl::StrCat(
      "--backend=nccl needs a CUDA device, and none was found (", reason,
      "). Run on the CPU instead: --backend=sim (ranks as threads in this "
      "process) or, for real processes, mpirun -np N <binary> --backend=mpi");
}

}  // namespace

absl::StatusOr<ResolvedBackend> ResolveBackend(const BackendChoice& choice) {
  if (choice.world_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world_size=", choice.world_size, "; expected 0 (default) or more"));
  }
  absl::StatusOr<std::optional<comm::LaunchEnv>> env = comm::DetectLaunchEnv();
  if (!env.ok()) return env.status();
  const bool launched = env->has_value() && (*env)->launcher != "torchrun";
  std::string backend = choice.backend;
  if (backend == "auto") {
    if (launched && (*env)->world_size > 1) {
      backend = "mpi";
    } else if (GpuCount() > 0) {
      backend = "nccl";
    } else {
      backend = "sim";
    }
  }
  if (backend == "sim") {
    int n = choice.world_size;
    if (n == 0) n = GpuCount() > 0 ? GpuCount() : 2;
    if (n > sim::kMaxWorldSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("--world_size=", n, "; the simulated cluster runs 1 to ",
                       sim::kMaxWorldSize, " ranks"));
    }
    return ResolvedBackend{"sim", n};
  }
  if (backend == "mpi") {
    const int n = launched ? (*env)->world_size : 1;
    if (choice.world_size != 0 && choice.world_size != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--world_size=", choice.world_size, " but the MPI job has ", n,
          " rank(s); start it with mpirun -np ", choice.world_size,
          " (or drop --world_size)"));
    }
    return ResolvedBackend{"mpi", n};
  }
  if (backend == "nccl") {
    const int gpus = GpuCount();
    if (gpus == 0) return absl::FailedPreconditionError(NoGpuMessage());
    const int n = choice.world_size == 0 ? gpus : choice.world_size;
    if (n > gpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("--world_size=", n, " but only ", gpus,
                       " CUDA device(s) are visible (CUDA_VISIBLE_DEVICES)"));
    }
    return ResolvedBackend{"nccl", n};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --backend=", choice.backend,
                   "; expected sim, mpi, nccl or auto"));
}

absl::Status RunOnBackend(
    const ResolvedBackend& backend,
    const std::function<absl::Status(comm::Communicator&)>& fn) {
  if (backend.backend == "sim") {
    return sim::Run(backend.world_size,
                    [&fn](int, comm::Communicator& comm) { return fn(comm); })
        .status();
  }
  if (backend.backend == "mpi") {
    absl::StatusOr<std::unique_ptr<comm::MpiCommunicator>> comm =
        comm::MpiCommunicator::Create();
    if (!comm.ok()) return comm.status();
    absl::Status status = fn(**comm);
    if (!status.ok()) {
      // The other processes would wait for this rank's collectives until
      // their timeout: say why, then end the whole job now.
      std::fprintf(stderr, "rank %d: %s\nrank %d: aborting the MPI job\n",
                   (*comm)->rank(), status.ToString().c_str(), (*comm)->rank());
      std::fflush(stderr);
      comm::MpiAbort(1);
      return status;  // not reached
    }
    return absl::OkStatus();
  }
  if (backend.backend == "nccl") {
    // Each rank's thread has its device current. Its tensor ops go to its
    // current stream there; its collectives must start after them.
    auto rank_fn = [&fn](int, comm::NcclCommunicator& comm) -> absl::Status {
      absl::StatusOr<void*> stream = cuda::CurrentStream(comm.device());
      if (!stream.ok()) return stream.status();
      comm.set_compute_stream(comm::CudaStreamHandle{*stream});
      return fn(comm);
    };
    return comm::RunOnLocalGpus(backend.world_size, rank_fn).status();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("RunOnBackend: unknown backend '", backend.backend, "'"));
}

Device DeviceFor(const comm::Communicator& comm) {
  if (comm.backend() != "nccl") return Device::CPU();
  if (const auto* nccl = dynamic_cast<const comm::NcclCommunicator*>(&comm)) {
    return Device::CUDA(nccl->device());
  }
  return Device::CUDA(comm.rank());  // another NCCL wrapper: rank r on GPU r
}

}  // namespace tandem::train
