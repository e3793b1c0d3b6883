// The Box-Muller step of PyTorch's CPU normal_ on float32 tensors, bit for
// bit as PyTorch 1.13 computes it on an x86-64 CPU with AVX2.
//
// For a contiguous float tensor of at least 16 elements PyTorch fills the
// tensor with uniforms first, then transforms every block of 16 in place:
// u1 = 1 - data[j] and u2 = data[j + 8] for j in [0, 8) give
//   radius = sqrt(-2 * log(u1)),  theta = 2pi * u2,
//   data[j] = fma(radius * cos(theta), std, mean),
//   data[j + 8] = fma(radius * sin(theta), std, mean).
// On AVX2 its log, sin and cos are not the C library's but eight-lane Cephes
// polynomials (float constants, float arithmetic), and its compiler fused
// every multiply that feeds an add into one fused multiply-add. The
// functions here evaluate the same polynomials one lane at a time with the
// same roundings (std::fmaf where PyTorch's build fused, plain float
// operations elsewhere; this file is compiled with -ffp-contract=off so our
// compiler adds no fusion of its own), so their results equal PyTorch's in
// every bit on any CPU. docs/pytorch_compat.md states the recipe.
//
// Thread-safety: pure functions.
#ifndef TANDEM_TENSOR_NORMAL_FILL_H_
#define TANDEM_TENSOR_NORMAL_FILL_H_

namespace tandem::internal {

// Cephes' single-precision natural logarithm as PyTorch's AVX2 kernel
// evaluates it. For x in (0, 1] (what Box-Muller feeds it) it is within
// 1-2 ulp of log(x); x <= 0 gives NaN.
float CephesLogf(float x);

// Cephes' single-precision sine and cosine, evaluated together as PyTorch's
// AVX2 kernel does (range reduction by pi/4 in three float steps). Accurate
// for |x| < 8192; Box-Muller feeds it [0, 2pi).
void CephesSinCosf(float x, float* sin_out, float* cos_out);

// Transforms data[0..16) (uniforms in [0, 1)) into normal samples in place,
// exactly as PyTorch's AVX2 normal_fill_16 does.
void NormalFill16(float* data, float mean, float std);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_NORMAL_FILL_H_
