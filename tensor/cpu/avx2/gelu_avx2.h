// The f32 CPU kernels of Gelu's tanh form on AVX2 + FMA
// (tensor/ops/gelu.cc dispatches here when avx2::Avx2FmaCpu()): PyTorch's
// formulas (aten/src/ATen/native/cpu/Activation.cpp) evaluated in double,
// four lanes at a time, and rounded once to float, so each result is
// within an ulp of the portable float kernels' (which round every step).
//
// Thread-safety: pure functions on caller-owned memory.
#ifndef TANDEM_TENSOR_CPU_AVX2_GELU_AVX2_H_
#define TANDEM_TENSOR_CPU_AVX2_GELU_AVX2_H_

#include <cstdint>

namespace tandem::internal {

// y[i] = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
void GeluTanhAvx2(const float* x, int64_t n, float* y);

// gx[i] = g[i] * d/dx of the above at x[i].
void GeluTanhBackwardAvx2(const float* g, const float* x, int64_t n, float* gx);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_CPU_AVX2_GELU_AVX2_H_
