// Embedding's CUDA kernels (forward gather and EmbeddingBackward's
// index-add of rows). The host side, which registers them in the kernel
// table, is ops_embedding.cc; these two entry points are declared there.
// The indices were range-checked by the op's definition.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

// y[i, k] = w[idx[i], k] for i < n, k < d.
template <typename T, typename I>
__global__ void EmbeddingForwardKernel(const I* idx, const T* w, T* y,
                                       int64_t n, int64_t d) {
  TANDEM_CUDA_LOOP(j, n * d) {
    const int64_t i = j / d, k = j % d;
    y[j] = w[static_cast<int64_t>(idx[i]) * d + k];
  }
}

// One thread per column k adds g[i, k] into gw[idx[i], k] for i = 0, 1, ...
// in order: no atomics, so the sums are made in the CPU kernel's order and
// every run gives the same bits (PyTorch's CUDA kernel sorts the indices
// for the same reason). The parallelism is the embedding width.
template <typename T, typename I>
__global__ void EmbeddingBackwardKernel(const T* g, const I* idx, T* gw,
                                        int64_t n, int64_t d) {
  TANDEM_CUDA_LOOP(k, d) {
    for (int64_t i = 0; i < n; ++i) {
      T* dst = gw + static_cast<int64_t>(idx[i]) * d + k;
      *dst = St<T>(Ld(*dst) + Ld(g[i * d + k]));
    }
  }
}

template <typename F>
cudaError_t DispatchIndex(DType index_dtype, F&& f) {
  if (index_dtype == DType::kI64) return f(int64_t{});
  if (index_dtype == DType::kI32) return f(int32_t{});
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t EmbeddingForward(DType dtype, DType index_dtype, const void* idx,
                             const void* w, void* y, int64_t n, int64_t d,
                             cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return DispatchIndex(index_dtype, [&](auto zi) {
      using I = decltype(zi);
      return Launch(n * d, stream, EmbeddingForwardKernel<T, I>,
                    static_cast<const I*>(idx), static_cast<const T*>(w),
                    static_cast<T*>(y), n, d);
    });
  });
}

cudaError_t EmbeddingBackward(DType dtype, DType index_dtype, const void* g,
                              const void* idx, void* gw, int64_t n, int64_t d,
                              cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return DispatchIndex(index_dtype, [&](auto zi) {
      using I = decltype(zi);
      return Launch(d, stream, EmbeddingBackwardKernel<T, I>,
                    static_cast<const T*>(g), static_cast<const I*>(idx),
                    static_cast<T*>(gw), n, d);
    });
  });
}

}  // namespace tandem::cuda::kernels
