// Fused optimizer updates: one kernel per parameter tensor, repeating the
// CPU update (tensor/optim/sgd.cc, adamw.cc) operation by operation. With
// --fmad=false every + and * rounds on its own and fma() is the only fused
// operation, exactly as on the CPU, so the results are bit-identical.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

// Scalars rounded to the parameter's dtype on the host, as the CPU does.
template <typename T>
struct SgdScalars {
  T wd, momentum, keep, neg_lr;
  bool decay, nesterov, maximize, first;
};

template <typename T>
__global__ void SgdKernel(T* p, const T* g, T* buf, int64_t n,
                          SgdScalars<T> s) {
  TANDEM_CUDA_LOOP(i, n) {
    T d = s.maximize ? -g[i] : g[i];
    if (s.decay) d = fma(p[i], s.wd, d);
    if (buf != nullptr) {
      buf[i] = s.first ? d : fma(d, s.keep, buf[i] * s.momentum);
      d = s.nesterov ? fma(buf[i], s.momentum, d) : buf[i];
    }
    p[i] = fma(d, s.neg_lr, p[i]);
  }
}

template <typename T>
struct AdamWScalars {
  T decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias2_sqrt, eps,
      neg_step;
  bool maximize;
};

template <typename T>
__global__ void AdamWKernel(T* p, const T* g, T* m, T* v, T* v_max, int64_t n,
                            AdamWScalars<T> s) {
  TANDEM_CUDA_LOOP(i, n) {
    const T grad = s.maximize ? -g[i] : g[i];
    p[i] = p[i] * s.decay;
    m[i] = fma(grad, s.one_minus_beta1, m[i] * s.beta1);
    v[i] = fma(s.one_minus_beta2 * grad, grad, v[i] * s.beta2);
    T second = v[i];
    if (v_max != nullptr) {
      v_max[i] = v_max[i] < v[i] ? v[i] : v_max[i];  // std::max
      second = v_max[i];
    }
    const T denom = sqrt(second) / s.bias2_sqrt + s.eps;
    p[i] = p[i] + (s.neg_step * m[i]) / denom;
  }
}

}  // namespace

cudaError_t SgdStep(DType dtype, void* p, const void* g, void* buf, int64_t n,
                    const SgdArgs& a, cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    SgdScalars<T> s{static_cast<T>(a.weight_decay),
                    static_cast<T>(a.momentum),
                    static_cast<T>(1 - a.dampening),
                    static_cast<T>(-a.lr),
                    a.weight_decay != 0,
                    a.nesterov,
                    a.maximize,
                    a.first};
    return Launch(n, stream, SgdKernel<T>, static_cast<T*>(p),
                  static_cast<const T*>(g), static_cast<T*>(buf), n, s);
  });
}

cudaError_t AdamWStep(DType dtype, void* p, const void* g, void* m, void* v,
                      void* v_max, int64_t n, const AdamWArgs& a,
                      cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    AdamWScalars<T> s{static_cast<T>(a.decay),
                      static_cast<T>(a.beta1),
                      static_cast<T>(1 - a.beta1),
                      static_cast<T>(a.beta2),
                      static_cast<T>(1 - a.beta2),
                      static_cast<T>(a.bias2_sqrt),
                      static_cast<T>(a.eps),
                      static_cast<T>(-a.step_size),
                      a.maximize};
    return Launch(n, stream, AdamWKernel<T>, static_cast<T*>(p),
                  static_cast<const T*>(g), static_cast<T*>(m),
                  static_cast<T*>(v), static_cast<T*>(v_max), n, s);
  });
}

}  // namespace tandem::cuda::kernels
