#include "tensor/cuda/internal/status.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace tandem::cuda::internal {

absl::Status CudaStatus(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, " failed: ", cudaGetErrorName(err), " (",
                   cudaGetErrorString(err), ")");
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
      return absl::FailedPreconditionError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasStatus(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, " failed: ", cublasGetStatusName(status), " (",
                   cublasGetStatusString(status), ")");
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError(message);
  }
  return absl::InternalError(message);
}

}  // namespace tandem::cuda::internal
