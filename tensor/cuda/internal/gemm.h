// Internal (CUDA builds only): row-major GEMM on device memory through
// cublasGemmEx, the CUDA twin of tensor/cpu/blas.h.
//
//   // C[M,N] = alpha * op(A) * op(B) + beta * C on the thread's stream
//   TANDEM_RETURN_IF_ERROR(Gemm(device, stream, DType::kF32,
//       /*transpose_a=*/false, /*transpose_b=*/true, M, N, K,
//       1.0, a, b, /*beta=*/0.0, c));
//
// Row-major through the usual transpose trick: cuBLAS is column-major, and a
// row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, so the
// call swaps A and B (and M and N). Leading dimensions are the row-major
// defaults (as tensor/cpu/blas.h).
//
// Types: f32 (CUBLAS_COMPUTE_32F, or 32F_FAST_TF32 when AllowTf32()), f64
// (CUBLAS_COMPUTE_64F), f16 and bf16 inputs and outputs with f32
// accumulation (tensor cores). alpha and beta are given as doubles.
// M == 0 or N == 0 does nothing; K == 0 sets C = beta * C without cuBLAS
// (beta must then be 0 or 1). Dimensions beyond 32-bit int are
// InvalidArgument.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_GEMM_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_GEMM_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "base/dtype.h"

namespace tandem::cuda::internal {

absl::Status Gemm(int device, cudaStream_t stream, DType dtype,
                  bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                  int64_t k, double alpha, const void* a, const void* b,
                  double beta, void* c);

// `batch` independent GEMMs; matrix i of A starts stride_a elements after
// matrix i-1 (0 reuses one matrix for every product), likewise B and C.
absl::Status GemmStridedBatched(int device, cudaStream_t stream, DType dtype,
                                bool transpose_a, bool transpose_b, int64_t m,
                                int64_t n, int64_t k, double alpha,
                                const void* a, int64_t stride_a, const void* b,
                                int64_t stride_b, double beta, void* c,
                                int64_t stride_c, int64_t batch);

}  // namespace tandem::cuda::internal

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_GEMM_H_
