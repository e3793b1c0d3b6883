// tandem's own f32 GEMM in every layout: a BLIS-style loop nest (both
// operands packed into the micro-kernel's order, K in blocks) around a 6x16
// AVX2 + FMA micro-kernel (12 accumulators of 8 floats). On cpu::Gemm's
// fast path (KernelChoice::kFastest) for one case only (UsePackedGemmTn):
// Linear's weight gradient gᵀ·x with K = batch (<= 128) written with
// beta == 0, i.e. into a gradient marked zero (Tensor::MarkGradZero). There
// its tiles walk the large C along its rows and store them without reading
// C: 24.7 ms for 4096 x 4096 x 64 against OpenBLAS's 27.7 (zero fill +
// beta 1) or 31.4 (its own beta 0), one thread (bench/PERFORMANCE.md). With
// beta == 1 it lost by ~5 % inside a quiet step, so OpenBLAS keeps the
// accumulating product. In the other layouts its plain-C micro-kernel
// reaches ~0.85-0.95 of OpenBLAS's assembly (bench/gemm_shapes_benchmark.cc,
// kernel 5).
//
// The rounding differs from OpenBLAS's and oneDNN's (another summation
// order: K in blocks of up to 256, each block's terms summed in order into
// 8-lane accumulators), so KernelChoice::kPyTorch never uses it. It is
// deterministic: the same inputs give the same bits on any thread, whatever
// C held before when beta == 0.
//
// Thread-safety: reentrant; each calling thread keeps its own packing
// buffers (thread_local, grown to the largest blocks seen: at most ~1.2 MiB).
// Never blocks. Requires HasSkinnyGemm() (AVX2 and FMA).
#ifndef TANDEM_TENSOR_CPU_PACKED_GEMM_H_
#define TANDEM_TENSOR_CPU_PACKED_GEMM_H_

#include <cstdint>

namespace tandem::cpu {

// C[m,n] = alpha * op(A)·op(B) + beta * C, row-major and dense as
// cpu::Gemm's operands: A is [m,k] (lda = k) or, transposed, [k,m]
// (lda = m); B is [k,n] (ldb = n) or, transposed, [n,k] (ldb = k); C is
// [m,n] (ldc = n). m or n <= 0 is a no-op, k <= 0 scales C by beta;
// beta == 0 never reads C (NaN in C does not propagate).
void PackedGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                int64_t k, float alpha, const float* a, const float* b,
                float beta, float* c);

// Whether cpu::Gemm's fast path sends this f32 product to PackedGemm:
// op(A)·op(B) = Aᵀ·B (transpose_a only) with beta == 0, K <= 128, M and N
// >= 256 (a weight gradient written, not accumulated), HasSkinnyGemm(), and
// no AVX-512 (measured on AVX2 only, as UseSkinnyGemm).
bool UsePackedGemmTn(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                     int64_t k, float beta);

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_PACKED_GEMM_H_
