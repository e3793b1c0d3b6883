// Gelu's CUDA kernels (forward and GeluBackward), PyTorch's formulas
// (aten/src/ATen/native/cuda/ActivationGeluKernel.cu), computed in the
// accumulation type. The host side, which registers them in the kernel
// table, is ops_gelu.cc; these two entry points are declared there.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

template <typename A>
__device__ A GeluValue(A x, bool tanh_form) {
  if (tanh_form) {
    const A beta = A(M_SQRT2 * M_2_SQRTPI * 0.5);
    const A kappa = A(0.044715);
    const A inner = beta * (x + kappa * x * x * x);
    return A(0.5) * x * (A(1) + tanh(inner));
  }
  return x * A(0.5) * (A(1) + erf(x * A(M_SQRT1_2)));
}

template <typename A>
__device__ A GeluGrad(A x, bool tanh_form) {
  if (tanh_form) {
    const A beta = A(M_SQRT2 * M_2_SQRTPI * 0.5);
    const A kappa = A(0.044715);
    const A x_sq = x * x;
    const A inner = beta * (x + kappa * x_sq * x);
    const A tanh_inner = tanh(inner);
    const A left = A(0.5) * x;
    const A right = A(1) + tanh_inner;
    const A left_derivative = A(0.5) * right;
    const A right_derivative =
        (A(1) - tanh_inner * tanh_inner) * beta * (A(1) + A(3) * kappa * x_sq);
    return left_derivative + left * right_derivative;
  }
  const A cdf = A(0.5) * (A(1) + erf(x * A(M_SQRT1_2)));
  const A pdf = exp(A(-0.5) * x * x) * A(M_2_SQRTPI * M_SQRT1_2 * 0.5);
  return cdf + x * pdf;
}

template <typename T>
__global__ void GeluForwardKernel(const T* x, T* y, int64_t n, bool tanh_form) {
  TANDEM_CUDA_LOOP(i, n) { y[i] = St<T>(GeluValue(Ld(x[i]), tanh_form)); }
}

template <typename T>
__global__ void GeluBackwardKernel(const T* g, const T* x, T* gx, int64_t n,
                                   bool tanh_form) {
  TANDEM_CUDA_LOOP(i, n) {
    gx[i] = St<T>(Ld(g[i]) * GeluGrad(Ld(x[i]), tanh_form));
  }
}

}  // namespace

cudaError_t GeluForward(DType dtype, bool tanh_form, const void* x, void* y,
                        int64_t n, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, GeluForwardKernel<T>, static_cast<const T*>(x),
                  static_cast<T*>(y), n, tanh_form);
  });
}

cudaError_t GeluBackward(DType dtype, bool tanh_form, const void* g,
                         const void* x, void* gx, int64_t n,
                         cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, GeluBackwardKernel<T>, static_cast<const T*>(g),
                  static_cast<const T*>(x), static_cast<T*>(gx), n, tanh_form);
  });
}

}  // namespace tandem::cuda::kernels
