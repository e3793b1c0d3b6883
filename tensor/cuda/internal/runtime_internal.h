// Internal (CUDA builds only): what kernels and ops need from the runtime —
// entering a device (current device + the thread's current stream) and the
// thread's cuBLAS handle.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_RUNTIME_INTERNAL_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_RUNTIME_INTERNAL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::cuda::internal {

// OK when `device` names an existing device; FailedPrecondition without any
// device (saying why), InvalidArgument for an index out of range.
absl::Status CheckDevice(int device);

// Makes `device` the calling thread's current CUDA device and returns the
// thread's current stream on it (tensor/cuda/cuda.h). Every op calls this
// before touching the device.
absl::StatusOr<cudaStream_t> Enter(int device);

// The calling thread's cuBLAS handle for `device` (which must be current),
// bound to `stream`. Handles come from a per-device pool, are kept for the
// thread's lifetime and returned to the pool when it exits.
absl::StatusOr<cublasHandle_t> BlasHandle(int device, cudaStream_t stream);

}  // namespace tandem::cuda::internal

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_RUNTIME_INTERNAL_H_
