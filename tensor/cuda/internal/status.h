// Internal (CUDA builds only): CUDA and cuBLAS error codes as absl::Status.
//
//   TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, n, kind, stream));
//   // on failure: Internal "cudaMemcpyAsync(dst, src, n, kind, stream)
//   // failed: cudaErrorInvalidValue (invalid argument)"
//
// The message names the call (its source text) and the error's name and
// description; "no device" errors become FailedPrecondition and
// out-of-memory ResourceExhausted, so callers can tell them apart.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_STATUS_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace tandem::cuda::internal {

// OK for cudaSuccess; otherwise the error described above.
absl::Status CudaStatus(cudaError_t err, const char* call);
// OK for CUBLAS_STATUS_SUCCESS; otherwise Internal naming the call and the
// cuBLAS status (name and description).
absl::Status CublasStatus(cublasStatus_t status, const char* call);

}  // namespace tandem::cuda::internal

#define TANDEM_CUDA_RETURN_IF_ERROR(expr)                                   \
  do {                                                                      \
    const cudaError_t tandem_cuda_err_ = (expr);                            \
    if (tandem_cuda_err_ != cudaSuccess) {                                  \
      return ::tandem::cuda::internal::CudaStatus(tandem_cuda_err_, #expr); \
    }                                                                       \
  } while (false)

#define TANDEM_CUBLAS_RETURN_IF_ERROR(expr)                                \
  do {                                                                     \
    const cublasStatus_t tandem_cublas_status_ = (expr);                   \
    if (tandem_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                  \
      return ::tandem::cuda::internal::CublasStatus(tandem_cublas_status_, \
                                                    #expr);                \
    }                                                                      \
  } while (false)

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_STATUS_H_
