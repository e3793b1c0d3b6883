// Built when no CUDA toolkit was found (or TANDEM_NO_CUDA=1).
#include "absl/status/status.h"
#include "comm/nccl/cuda_probe.h"

namespace tandem::comm {

absl::StatusOr<CudaProbe> ProbeCuda() {
  CudaProbe probe;
  probe.no_device_reason =
      "tandem was built without CUDA (no toolkit found at build time, or "
      "TANDEM_NO_CUDA=1); install a CUDA toolkit with NCCL and rebuild";
  return probe;
}

absl::Status RunProbeKernel(int device) {
  return absl::FailedPreconditionError(
      "RunProbeKernel(device " + std::to_string(device) +
      "): tandem was built without CUDA; install a CUDA toolkit with NCCL "
      "and rebuild");
}

}  // namespace tandem::comm
