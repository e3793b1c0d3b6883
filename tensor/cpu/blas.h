// Row-major GEMM on host memory through OpenBLAS, with tandem's defaults.
//
//   // C[M,N] = alpha * op(A) * op(B) + beta * C
//   TANDEM_RETURN_IF_ERROR(tandem::cpu::Gemm<float>(
//       /*transpose_a=*/false, /*transpose_b=*/true, M, N, K,
//       1.f, a, b, /*beta=*/0.f, c));
//
// Dimensions are int64_t; a dimension beyond OpenBLAS's 32-bit int is an
// InvalidArgument error. M == 0 or N == 0 is a no-op; K == 0 skips BLAS
// and sets C = beta * C (C = 0 when beta == 0, never reading C), so callers
// never special-case empty tensors.
//
// Threads: the first Gemm (or SetBlasNumThreads) sets OpenBLAS to ONE thread
// because several simulated ranks share the cores. OpenBLAS's thread count
// is process-wide; SetBlasNumThreads changes it for everyone. Gemm itself
// is reentrant (OpenBLAS serialises its own thread pool).
#ifndef TANDEM_TENSOR_CPU_BLAS_H_
#define TANDEM_TENSOR_CPU_BLAS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tandem::cpu {

// lda/ldb/ldc are the row-major defaults: op(A) is [M,K] so A is [M,K]
// (lda = K) or, transposed, [K,M] (lda = M); likewise B; C is [M,N].
template <typename T>
absl::Status Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                  int64_t k, T alpha, const T* a, const T* b, T beta, T* c);

// Sets the number of OpenBLAS threads for the whole process (>= 1;
// InvalidArgument otherwise). Call before starting ranks, e.g. a one-rank
// benchmark may use every core.
absl::Status SetBlasNumThreads(int num_threads);
// OpenBLAS's current thread count (after applying tandem's default of 1).
int BlasNumThreads();

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_BLAS_H_
