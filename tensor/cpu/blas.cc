#include "tensor/cpu/blas.h"

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/math_tally.h"
#include "tensor/cpu/onednn_threads.h"
#include "tensor/cpu/packed_gemm.h"
#include "tensor/cpu/skinny_gemm.h"

namespace tandem::cpu {
namespace {

std::atomic<KernelChoice> kernel_choice{KernelChoice::kFastest};

// C = 0 before an OpenBLAS call with beta == 0, which then runs with beta =
// 1. OpenBLAS's driver does exactly this itself (its beta kernel zeroes C,
// then the micro-kernels add into it), so the bits are the same (checked
// on 24 shapes and layouts); but its zeroing loop is slow: 4096 x 4096 x 64
// Aᵀ·B took 31.4 ms with beta 0 against 27.7 ms as memset + beta 1 and
// 25.4 ms with beta 1 alone, one thread (bench/PERFORMANCE.md).
template <typename T>
void ZeroForBlas(int m, int n, T* c, int ldc) {
  if (ldc == n) {
    std::memset(c, 0, sizeof(T) * static_cast<size_t>(m) * n);
    return;
  }
  for (int i = 0; i < m; ++i) {
    std::memset(c + static_cast<int64_t>(i) * ldc, 0, sizeof(T) * n);
  }
}

// Applies tandem's default (one OpenBLAS thread) exactly once, before the
// first GEMM or explicit setting.
void EnsureDefaultThreads() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// `onednn`: f32 on oneDNN in every layout (GemmOneDnn).
template <typename T>
void Blas(bool onednn, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
          int k, T alpha, const T* a, int lda, const T* b, int ldb, T beta,
          T* c, int ldc);

template <>
void Blas<float>(bool onednn, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m,
                 int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc) {
  const bool fastest = GetKernelChoice() == KernelChoice::kFastest;
  if (!onednn && fastest &&
      UseSkinnyGemm(ta == CblasTrans, tb == CblasTrans, m, n, k) && lda == k &&
      ldb == k && ldc == n) {
    // tandem's own kernel for x·Wᵀ with few rows: 83-89 GFLOP/s per thread
    // at batch 64 where both libraries ran 62-78 (skinny_gemm.h). Not when
    // the caller asked for oneDNN's bits (GemmOneDnn).
    SkinnyGemmNt(m, n, k, alpha, a, b, beta, c);
    return;
  }
  if (!onednn && fastest &&
      UsePackedGemmTn(ta == CblasTrans, tb == CblasTrans, m, n, k, beta) &&
      lda == m && ldb == n && ldc == n) {
    // Linear's weight gradient written into a gradient marked zero: stores
    // C without reading it (packed_gemm.h).
    PackedGemm(true, false, m, n, k, alpha, a, b, beta, c);
    return;
  }
  // A·B with at most kSkinnyNnMaxRows rows (Linear's input gradient g·W at
  // batch 64) stays with OpenBLAS: inside the large MLP's step oneDNN's
  // sgemm ran it at ~0.6 of the other products' rate, OpenBLAS at ~1.0
  // (bench/mlp_step_split, bench/PERFORMANCE.md), although the two tie
  // when the product is timed alone.
  constexpr int kSkinnyNnMaxRows = 128;
  if (onednn || (ta == CblasNoTrans && tb == CblasNoTrans && fastest &&
                 m > kSkinnyNnMaxRows)) {
    // oneDNN for the other A·B: timed alone, on Linear's input gradient
    // (M = batch rows, weights as B) it ran 82-106 GFLOP/s per thread here
    // against OpenBLAS's 61-73, and no slower on the other NN shapes
    // measured (2048³, conv's W·col, GPT's 2048-row products); the
    // transposed layouts (forward X·Wᵀ, weight gradient Gᵀ·X) stay with
    // OpenBLAS, which was as fast or faster there (bench/PERFORMANCE.md).
    ApplyBlasThreadsToOneDnn();
    const dnnl_status_t status = dnnl_sgemm(
        ta == CblasNoTrans ? 'N' : 'T', tb == CblasNoTrans ? 'N' : 'T', m, n, k,
        alpha, a, lda, b, ldb, beta, c, ldc);
    if (status == dnnl_success) return;
    // Only argument errors fail, and Gemm checked those: fall through to
    // OpenBLAS rather than leave C unwritten.
  }
  if (beta == 0.f) ZeroForBlas(m, n, c, ldc), beta = 1.f;
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

template <>
void Blas<double>(bool /*onednn*/, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                  int m, int n, int k, double alpha, const double* a, int lda,
                  const double* b, int ldb, double beta, double* c, int ldc) {
  if (beta == 0.0) ZeroForBlas(m, n, c, ldc), beta = 1.0;
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

}  // namespace

// oneDNN parallelises with OpenMP, whose thread count is per calling thread
// (an OpenMP ICV): every rank thread applies OpenBLAS's process-wide count
// (SetBlasNumThreads; 1 by default) to itself before its first oneDNN call
// and whenever it changed. Without this each rank would run OpenMP teams as
// wide as the machine, oversubscribing the cores that the other ranks use.
void ApplyBlasThreadsToOneDnn() {
  EnsureDefaultThreads();
  thread_local int applied = 0;
  const int wanted = openblas_get_num_threads();
  if (applied != wanted) {
    omp_set_num_threads(wanted);
    applied = wanted;
  }
}

// lda, ldb, ldc: < 0 for the row-major defaults.
template <typename T>
absl::Status GemmOn(bool onednn, bool transpose_a, bool transpose_b, int64_t m,
                    int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                    const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m < 0 || n < 0 || k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: negative dimension M=", m, " N=", n, " K=", k));
  }
  const int64_t a_row = transpose_a ? m : k;
  const int64_t b_row = transpose_b ? k : n;
  if (lda < 0) lda = a_row;
  if (ldb < 0) ldb = b_row;
  if (ldc < 0) ldc = n;
  if (lda < a_row || ldb < b_row || ldc < n) {
    return absl::InvalidArgumentError(
        absl::StrCat("Gemm: leading dimensions lda=", lda, " ldb=", ldb,
                     " ldc=", ldc, " are shorter than the stored rows (", a_row,
                     ", ", b_row, ", ", n, ") of M=", m, " N=", n, " K=", k,
                     "; pass each operand's row pitch in elements"));
  }
  if (m == 0 || n == 0) return absl::OkStatus();
  base::ScopedMathKernel tally;  // the network clock's FLOP-bound share
  if (k == 0) {
    // op(A)·op(B) is zero; BLAS would still scale C, do it here.
    for (int64_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      if (beta == T(0)) {
        std::fill(row, row + n, T(0));
      } else if (beta != T(1)) {
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
    return absl::OkStatus();
  }
  if (std::max({m, n, k, lda, ldb, ldc}) > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Gemm: dimension too large for OpenBLAS's 32-bit int: M=", m, " N=", n,
        " K=", k, " lda=", lda, " ldb=", ldb, " ldc=", ldc));
  }
  EnsureDefaultThreads();
  Blas<T>(onednn, transpose_a ? CblasTrans : CblasNoTrans,
          transpose_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
          static_cast<int>(n), static_cast<int>(k), alpha, a,
          static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
          static_cast<int>(ldc));
  return absl::OkStatus();
}

template <typename T>
absl::Status Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                  int64_t k, T alpha, const T* a, const T* b, T beta, T* c) {
  return GemmOn(false, transpose_a, transpose_b, m, n, k, alpha, a, -1, b, -1,
                beta, c, -1);
}

template <typename T>
absl::Status GemmStrided(bool transpose_a, bool transpose_b, int64_t m,
                         int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                         const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (lda < 0 || ldb < 0 || ldc < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GemmStrided: negative leading dimension lda=", lda,
                     " ldb=", ldb, " ldc=", ldc));
  }
  return GemmOn(false, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
}

template <typename T>
absl::Status GemmOneDnn(bool transpose_a, bool transpose_b, int64_t m,
                        int64_t n, int64_t k, T alpha, const T* a, const T* b,
                        T beta, T* c) {
  return GemmOn(true, transpose_a, transpose_b, m, n, k, alpha, a, -1, b, -1,
                beta, c, -1);
}

template absl::Status GemmOneDnn<float>(bool, bool, int64_t, int64_t, int64_t,
                                        float, const float*, const float*,
                                        float, float*);
template absl::Status GemmOneDnn<double>(bool, bool, int64_t, int64_t, int64_t,
                                         double, const double*, const double*,
                                         double, double*);
template absl::Status GemmStrided<float>(bool, bool, int64_t, int64_t, int64_t,
                                         float, const float*, int64_t,
                                         const float*, int64_t, float, float*,
                                         int64_t);
template absl::Status GemmStrided<double>(bool, bool, int64_t, int64_t, int64_t,
                                          double, const double*, int64_t,
                                          const double*, int64_t, double,
                                          double*, int64_t);
template absl::Status Gemm<float>(bool, bool, int64_t, int64_t, int64_t, float,
                                  const float*, const float*, float, float*);
template absl::Status Gemm<double>(bool, bool, int64_t, int64_t, int64_t,
                                   double, const double*, const double*, double,
                                   double*);

absl::Status SetBlasNumThreads(int num_threads) {
  if (num_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetBlasNumThreads: need at least 1 thread, got ", num_threads));
  }
  EnsureDefaultThreads();
  openblas_set_num_threads(num_threads);
  return absl::OkStatus();
}

void SetKernelChoice(KernelChoice choice) {
  kernel_choice.store(choice, std::memory_order_relaxed);
}

KernelChoice GetKernelChoice() {
  return kernel_choice.load(std::memory_order_relaxed);
}

int BlasNumThreads() {
  EnsureDefaultThreads();
  return openblas_get_num_threads();
}

}  // namespace tandem::cpu
