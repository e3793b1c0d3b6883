// What CUDA and NCCL this binary was built with, and what the machine has.
//
//   absl::StatusOr<CudaProbe> probe = ProbeCuda();
//   if (probe.ok() && probe->device_count > 0) { ... use the GPUs ... }
//
// The header names no CUDA type, so it compiles on machines without a
// toolkit; there `built_with_cuda` is false and ProbeCuda() reports zero
// devices. Thread-safe; each call queries the driver afresh.
#ifndef TANDEM_COMM_NCCL_CUDA_PROBE_H_
#define TANDEM_COMM_NCCL_CUDA_PROBE_H_

#include <string>

#include "absl/status/statusor.h"

namespace tandem::comm {

struct CudaProbe {
  bool built_with_cuda = false;  // compiled against a CUDA toolkit + NCCL
  int device_count = 0;          // 0 when no driver or no device is present
  std::string no_device_reason;  // why device_count is 0, for messages
  int nccl_version = 0;          // ncclGetVersion(), e.g. 22805; 0 without NCCL
  int runtime_version = 0;       // cudaRuntimeGetVersion(), e.g. 13000
};

// Never fails for "no GPU": that is device_count == 0 with a reason. Fails
// only when the runtime reports an unexpected error.
absl::StatusOr<CudaProbe> ProbeCuda();

// Runs a trivial kernel on `device` and checks its result; a smoke test of
// the nvcc-compiled code path. Requires device_count > device.
absl::Status RunProbeKernel(int device);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_CUDA_PROBE_H_
