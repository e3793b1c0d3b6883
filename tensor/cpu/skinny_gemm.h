// tandem's own f32 GEMM for a skinny product of a training step: Linear's
// forward x·Wᵀ at a batch of a few dozen rows, where OpenBLAS and oneDNN's
// sgemm run at 0.65-0.75 of their 2048³ rate on this AVX2 machine
// (bench/PERFORMANCE.md, "GEMM at the step's shapes").
//
// One BLIS-style 6x16 FMA micro-kernel (12 accumulators of 8 floats) for
// the product that loses most there, Linear's forward x·Wᵀ with few rows:
// W's rows are read in place, six at a time, as the broadcast operand (W
// is never copied: it is read from memory once per call, in six
// sequential streams), x is packed into 16-row strips (small: L2), and the
// 6x16 tiles of C^T = W·xᵀ are stored transposed into C. Of the other two
// products of a step, gᵀ·x and g·W go to OpenBLAS, which was as fast or
// faster inside the step (bench/PERFORMANCE.md).
// The rounding differs from OpenBLAS's and oneDNN's (another summation
// order), so kPyTorch (tensor/cpu/blas.h) never uses it; it is
// deterministic: the same inputs give the same bits on any thread.
//
// Thread-safety: reentrant; each calling thread keeps its own packing
// buffer for x (thread_local, grown to the largest shape seen: at most
// 256 KiB while m <= 65536). Never blocks.
#ifndef TANDEM_TENSOR_CPU_SKINNY_GEMM_H_
#define TANDEM_TENSOR_CPU_SKINNY_GEMM_H_

#include <cstdint>

namespace tandem::cpu {

// Whether this CPU has the instructions the kernels need (AVX2 and FMA),
// checked once at run time.
bool HasSkinnyGemm();

// Whether cpu::Gemm's fast path (KernelChoice::kFastest) sends this f32
// product to SkinnyGemmNt: op(A)·op(B) = A·Bᵀ (transpose_b only), a shape
// where it measured faster than the libraries here, HasSkinnyGemm(), and
// no AVX-512 (there the libraries' wider kernels stay: not measured).
bool UseSkinnyGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                   int64_t k);

// C[m,n] = alpha * x[m,k]·w[n,k]ᵀ + beta * C, row-major, dense (leading
// dimensions k, k and n). Correct at every shape (fast at the skinny ones);
// m or n <= 0 is a no-op, k <= 0 scales C by beta; beta == 0 never reads
// C. Requires HasSkinnyGemm().
void SkinnyGemmNt(int64_t m, int64_t n, int64_t k, float alpha, const float* x,
                  const float* w, float beta, float* c);

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_SKINNY_GEMM_H_
