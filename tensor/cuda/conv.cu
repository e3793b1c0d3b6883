// Convolution helpers (im2col, col2im) and max pooling, NCHW. The backward
// kernels gather: each input position sums its contributions itself, in the
// order the CPU's scatter loops add them, so no atomics are needed and the
// results are deterministic.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/kernel_util.cuh"

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

template <typename T>
__global__ void MaxPoolForwardKernel(PoolGeometry g, const T* x, T* y,
                                     int64_t* argmax) {
  const int64_t out_plane = g.out_h * g.out_w;
  TANDEM_CUDA_LOOP(idx, g.planes * out_plane) {
    const int64_t p = idx / out_plane;
    const int64_t oi = (idx % out_plane) / g.out_w;
    const int64_t oj = idx % g.out_w;
    const T* plane = x + p * g.height * g.width;
    int64_t best = oi * g.stride_h * g.width + oj * g.stride_w;
    Acc<T> bv = Ld(plane[best]);
    for (int64_t a = 0; a < g.kernel_h; ++a) {
      for (int64_t b = 0; b < g.kernel_w; ++b) {
        const int64_t k =
            (oi * g.stride_h + a) * g.width + (oj * g.stride_w + b);
        const Acc<T> v = Ld(plane[k]);
        // The first maximum wins; NaN propagates like PyTorch.
        if (!isnan(bv) && (isnan(v) || v > bv)) {
          best = k;
          bv = v;
        }
      }
    }
    y[idx] = plane[best];
    argmax[idx] = best;
  }
}

template <typename T>
__global__ void MaxPoolBackwardKernel(PoolGeometry g, const T* grad,
                                      const int64_t* argmax, T* dx,
                                      bool accumulate) {
  const int64_t in_plane = g.height * g.width;
  const int64_t out_plane = g.out_h * g.out_w;
  TANDEM_CUDA_LOOP(idx, g.planes * in_plane) {
    const int64_t p = idx / in_plane;
    const int64_t pos = idx % in_plane;
    const int64_t h = pos / g.width, w = pos % g.width;
    // Windows containing (h, w): oh*sh <= h <= oh*sh + kh - 1.
    const int64_t lo_h = h - g.kernel_h + 1;
    const int64_t lo_w = w - g.kernel_w + 1;
    const int64_t oh0 = lo_h <= 0 ? 0 : (lo_h + g.stride_h - 1) / g.stride_h;
    const int64_t ow0 = lo_w <= 0 ? 0 : (lo_w + g.stride_w - 1) / g.stride_w;
    const int64_t oh1 = h / g.stride_h < g.out_h ? h / g.stride_h : g.out_h - 1;
    const int64_t ow1 = w / g.stride_w < g.out_w ? w / g.stride_w : g.out_w - 1;
    Acc<T> acc = accumulate ? Ld(dx[idx]) : Acc<T>(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t k = p * out_plane + oh * g.out_w + ow;
        if (argmax[k] == pos) acc += Ld(grad[k]);
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

cudaError_t MaxPoolForward(DType dtype, const PoolGeometry& geo, const void* x,
                           void* y, int64_t* argmax, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(geo.planes * geo.out_h * geo.out_w, stream,
                  MaxPoolForwardKernel<T>, geo, static_cast<const T*>(x),
                  static_cast<T*>(y), argmax);
  });
}

cudaError_t MaxPoolBackward(DType dtype, const PoolGeometry& geo, const void* g,
                            const int64_t* argmax, void* dx, bool accumulate,
                            cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(geo.planes * geo.height * geo.width, stream,
                  MaxPoolBackwardKernel<T>, geo, static_cast<const T*>(g),
                  argmax, static_cast<T*>(dx), accumulate);
  });
}

}  // namespace tandem::cuda::kernels
