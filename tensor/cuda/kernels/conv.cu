// Convolution helpers (im2col, col2im), NCHW (pooling is pool.cu). The backward
// kernels gather: each input position sums its contributions itself, in the
// order the CPU's scatter loops add them, so no atomics are needed and the
// results are deterministic.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

template <typename T>
__global__ void Im2ColKernel(ConvGeometry g, const T* x, int64_t images,
                             T* col) {
  const int64_t rows = g.channels * g.kernel_h * g.kernel_w;
  const int64_t cols = g.out_h * g.out_w;
  const int64_t plane = g.channels * g.height * g.width;
  TANDEM_CUDA_LOOP(idx, images * rows * cols) {
    const int64_t img = idx / (rows * cols);
    const int64_t r = (idx / cols) % rows;
    const int64_t q = idx % cols;
    const int64_t c = r / (g.kernel_h * g.kernel_w);
    const int64_t i = (r / g.kernel_w) % g.kernel_h;
    const int64_t j = r % g.kernel_w;
    const int64_t h = (q / g.out_w) * g.stride_h - g.pad_h + i;
    const int64_t w = (q % g.out_w) * g.stride_w - g.pad_w + j;
    const bool inside = h >= 0 && h < g.height && w >= 0 && w < g.width;
    col[idx] = inside ? x[img * plane + (c * g.height + h) * g.width + w]
                      : St<T>(Acc<T>(0));
  }
}

template <typename T>
__global__ void Col2ImKernel(ConvGeometry g, const T* col, int64_t images,
                             T* dx, bool accumulate) {
  const int64_t rows = g.channels * g.kernel_h * g.kernel_w;
  const int64_t cols = g.out_h * g.out_w;
  const int64_t hw = g.height * g.width;
  TANDEM_CUDA_LOOP(idx, images * g.channels * hw) {
    const int64_t img = idx / (g.channels * hw);
    const int64_t c = (idx / hw) % g.channels;
    const int64_t h = (idx % hw) / g.width;
    const int64_t w = idx % g.width;
    const T* col_img = col + img * rows * cols;
    Acc<T> acc = accumulate ? Ld(dx[idx]) : Acc<T>(0);
    // Column rows (c, i, j) in increasing order, as Col2ImAdd visits them.
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      const int64_t hh = h + g.pad_h - i;
      if (hh < 0 || hh % g.stride_h != 0) continue;
      const int64_t oh = hh / g.stride_h;
      if (oh >= g.out_h) continue;
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t ww = w + g.pad_w - j;
        if (ww < 0 || ww % g.stride_w != 0) continue;
        const int64_t ow = ww / g.stride_w;
        if (ow >= g.out_w) continue;
        const int64_t r = (c * g.kernel_h + i) * g.kernel_w + j;
        acc += Ld(col_img[r * cols + oh * g.out_w + ow]);
      }
    }
    dx[idx] = St<T>(acc);
  }
}

}  // namespace

cudaError_t Im2Col(DType dtype, const ConvGeometry& geo, const void* x,
                   int64_t images, void* col, cudaStream_t stream) {
  const int64_t n = images * geo.channels * geo.kernel_h * geo.kernel_w *
                    geo.out_h * geo.out_w;
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, Im2ColKernel<T>, geo, static_cast<const T*>(x),
                  images, static_cast<T*>(col));
  });
}

cudaError_t Col2Im(DType dtype, const ConvGeometry& geo, const void* col,
                   int64_t images, void* dx, bool accumulate,
                   cudaStream_t stream) {
  const int64_t n = images * geo.channels * geo.height * geo.width;
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, Col2ImKernel<T>, geo, static_cast<const T*>(col),
                  images, static_cast<T*>(dx), accumulate);
  });
}

}  // namespace tandem::cuda::kernels
