// Row-major GEMM on host memory, with tandem's defaults: f32 A·Bᵀ with few
// rows (Linear's forward at training batch sizes) goes to tandem's own
// kernel (skinny_gemm.h), f32 Aᵀ·B with K <= 128 and beta == 0 (Linear's
// weight gradient written into a gradient marked zero) to its packed GEMM
// (packed_gemm.h), f32 A·B (neither operand transposed) with more
// than 128 rows to oneDNN's dnnl_sgemm, everything else
// (the other f32 layouts and shapes, all f64) to OpenBLAS — the fastest for
// each layout on the shapes training uses (measurements in blas.cc and
// bench/PERFORMANCE.md). Results may differ from another library's in the last
// bits, as between any two BLAS builds; they are deterministic.
//
//   // C[M,N] = alpha * op(A) * op(B) + beta * C
//   TANDEM_RETURN_IF_ERROR(tandem::cpu::Gemm<float>(
//       /*transpose_a=*/false, /*transpose_b=*/true, M, N, K,
//       1.f, a, b, /*beta=*/0.f, c));
//
// Dimensions are int64_t; a dimension beyond OpenBLAS's 32-bit int is an
// InvalidArgument error. M == 0 or N == 0 is a no-op; K == 0 skips BLAS
// and sets C = beta * C (C = 0 when beta == 0, never reading C), so callers
// never special-case empty tensors. With beta == 0 C is never read (NaN in
// C does not propagate) on every path.
//
// Threads: the first Gemm (or SetBlasNumThreads) sets OpenBLAS to ONE thread
// because several simulated ranks share the cores. The thread count is
// process-wide; SetBlasNumThreads changes it for everyone (OpenBLAS at once;
// oneDNN's OpenMP teams at each thread's next Gemm). Gemm itself is
// reentrant (OpenBLAS serialises its own thread pool; oneDNN's sgemm keeps
// no shared state).
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

// As Gemm, with explicit leading dimensions (row-major: the distance in
// elements between rows of A, B and C as stored), so operands can be views
// into wider rows (attention's heads read in place from a fused QKV
// projection). lda >= op(A)'s stored row length (K, or M when transposed),
// likewise ldb, ldc >= N; InvalidArgument otherwise. With the default
// leading dimensions it is Gemm, bit for bit (the same kernel choice).
template <typename T>
absl::Status GemmStrided(bool transpose_a, bool transpose_b, int64_t m,
                         int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                         const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// As Gemm, but f32 goes to oneDNN's sgemm in every layout and under either
// KernelChoice (f64: OpenBLAS, as Gemm). For a caller that measured oneDNN
// faster on its own shapes: conv_gemm's weight gradient, A·Bᵀ with K =
// batch x output pixels (bench/PERFORMANCE.md); Linear's transposed layouts
// stay on OpenBLAS, which was as fast or faster there.
template <typename T>
absl::Status GemmOneDnn(bool transpose_a, bool transpose_b, int64_t m,
                        int64_t n, int64_t k, T alpha, const T* a, const T* b,
                        T beta, T* c);

// Sets the number of OpenBLAS threads for the whole process (>= 1;
// InvalidArgument otherwise). Call before starting ranks, e.g. a one-rank
// benchmark may use every core.
absl::Status SetBlasNumThreads(int num_threads);
// OpenBLAS's current thread count (after applying tandem's default of 1).
int BlasNumThreads();

// Which kernels tandem's CPU ops call where several compute the same
// product with different rounding. Process-wide; every rank of a process
// should run with the same setting.
// - kFastest (the default): per layout the kernel measured fastest here
//   (tandem's SkinnyGemmNt for f32 A·Bᵀ with <= 128 rows where the CPU has
//   AVX2 and FMA but no AVX-512, its PackedGemm for f32 Aᵀ·B with K <= 128
//   and beta == 0 there, oneDNN's sgemm for f32 A·B with > 128
//   rows, OpenBLAS otherwise) and
//   Linear's forward at batch <= 256, where SkinnyGemmNt does not take it,
//   through its transpose. Sums in another order than PyTorch's: results differ
//   from PyTorch's in the last bits.
// - kPyTorch: the calls PyTorch 1.13 makes on the CPU (Debian's build):
//   OpenBLAS sgemm for every f32 layout, Linear's forward as
//   bias + x·Wᵀ in one sgemm with beta = 1. With OpenBLAS on one thread
//   (PyTorch's OpenBLAS uses one per core unless OPENBLAS_NUM_THREADS=1,
//   and its threaded driver splits the K loop differently) the products
//   equal PyTorch's bit for bit. Up to ~20% slower on some Linear
//   shapes (bench/PERFORMANCE.md); ddp_demo selects it.
enum class KernelChoice { kFastest, kPyTorch };
void SetKernelChoice(KernelChoice choice);
KernelChoice GetKernelChoice();

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_BLAS_H_
