// Pooling's CUDA kernels (MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and their
// common backward), NCHW, for the geometry of tensor/dispatch/op_kernels.h's
// Pool2dArgs. The forward computes one output per thread with the CPU
// kernel's loop (tensor/ops/pool.cc); the backward gathers: each input
// position sums the contributions of the windows that contain it, in the
// order the CPU's scatter adds them, so no atomics are needed and the
// results are deterministic. The host side, which registers them in the
// kernel table, is ops_pool.cc; these entry points are declared there.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {

namespace {

constexpr int kMax = 0, kAdaptive = 2;

struct Window {
  int64_t h0, h1, w0, w1, divisor;
};

// The CPU's WindowAt (tensor/ops/pool.cc).
__device__ Window WindowAt(const PoolGeometry& g, int64_t oi, int64_t oj) {
  Window win;
  if (g.mode == kAdaptive) {
    win.h0 = (oi * g.height) / g.out_h;
    win.h1 = ((oi + 1) * g.height + g.out_h - 1) / g.out_h;
    win.w0 = (oj * g.width) / g.out_w;
    win.w1 = ((oj + 1) * g.width + g.out_w - 1) / g.out_w;
    win.divisor = (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  win.h0 = oi * g.stride_h - g.pad_h;
  win.w0 = oj * g.stride_w - g.pad_w;
  win.h1 = min(win.h0 + g.kernel_h, g.height + g.pad_h);
  win.w1 = min(win.w0 + g.kernel_w, g.width + g.pad_w);
  const int64_t padded = (win.h1 - win.h0) * (win.w1 - win.w0);
  win.h0 = max(win.h0, int64_t{0});
  win.w0 = max(win.w0, int64_t{0});
  win.h1 = min(win.h1, g.height);
  win.w1 = min(win.w1, g.width);
  win.divisor =
      g.count_include_pad ? padded : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

// The gradient share of one output of an average pool: g / divisor, or
// g / height / width for the adaptive one (PyTorch's order).
template <typename A>
__device__ A AvgShare(const PoolGeometry& g, const Window& win, A grad) {
  if (g.mode == kAdaptive) {
    return grad / A(win.h1 - win.h0) / A(win.w1 - win.w0);
  }
  return grad / A(win.divisor);
}

template <typename T>
__global__ void PoolForwardKernel(PoolGeometry g, const T* x, T* y,
                                  int64_t* argmax) {
  using A = Acc<T>;
  const int64_t out_plane = g.out_h * g.out_w;
  TANDEM_CUDA_LOOP(idx, g.planes * out_plane) {
    const int64_t p = idx / out_plane;
    const int64_t oi = (idx % out_plane) / g.out_w;
    const int64_t oj = idx % g.out_w;
    const T* plane = x + p * g.height * g.width;
    const Window win = WindowAt(g, oi, oj);
    if (g.mode == kMax) {
      int64_t best = win.h0 * g.width + win.w0;
      A bv = -INFINITY;
      for (int64_t r = win.h0; r < win.h1; ++r) {
        for (int64_t c = win.w0; c < win.w1; ++c) {
          const A v = Ld(plane[r * g.width + c]);
          // The first maximum wins; NaN propagates (the first one).
          if (!isnan(bv) && (v > bv || isnan(v))) {
            best = r * g.width + c;
            bv = v;
          }
        }
      }
      y[idx] = St<T>(bv);
      argmax[idx] = best;
      continue;
    }
    if (win.h0 >= win.h1 || win.w0 >= win.w1) {
      y[idx] = St<T>(A(0));
      continue;
    }
    A sum = 0;
    for (int64_t r = win.h0; r < win.h1; ++r) {
      for (int64_t c = win.w0; c < win.w1; ++c)
        sum += Ld(plane[r * g.width + c]);
    }
    y[idx] = St<T>(g.mode == kAdaptive
                       ? sum / A(win.h1 - win.h0) / A(win.w1 - win.w0)
                       : sum / A(win.divisor));
  }
}

// First and last output index (inclusive, clamped) whose window may
// contain input position `pos` along one dim.
__device__ void OutputRange(const PoolGeometry& g, int64_t pos, bool rows,
                            int64_t& lo, int64_t& hi) {
  const int64_t in = rows ? g.height : g.width;
  const int64_t out = rows ? g.out_h : g.out_w;
  if (g.mode == kAdaptive) {
    // Conservative; the caller tests membership.
    lo = max(pos * out / in - 1, int64_t{0});
    hi = min(((pos + 1) * out + in - 1) / in, out - 1);
    return;
  }
  const int64_t k = rows ? g.kernel_h : g.kernel_w;
  const int64_t s = rows ? g.stride_h : g.stride_w;
  const int64_t pad = rows ? g.pad_h : g.pad_w;
  // o * s - pad <= pos <= o * s - pad + k - 1.
  const int64_t first = pos + pad - k + 1;
  lo = first <= 0 ? 0 : (first + s - 1) / s;
  hi = min((pos + pad) / s, out - 1);
}

template <typename T>
__global__ void PoolBackwardKernel(PoolGeometry g, const T* grad,
                                   const int64_t* argmax, T* dx) {
  using A = Acc<T>;
  const int64_t in_plane = g.height * g.width;
  const int64_t out_plane = g.out_h * g.out_w;
  TANDEM_CUDA_LOOP(idx, g.planes * in_plane) {
    const int64_t p = idx / in_plane;
    const int64_t pos = idx % in_plane;
    const int64_t h = pos / g.width, w = pos % g.width;
    int64_t oh0, oh1, ow0, ow1;
    OutputRange(g, h, true, oh0, oh1);
    OutputRange(g, w, false, ow0, ow1);
    A acc = 0;
    for (int64_t oi = oh0; oi <= oh1; ++oi) {
      for (int64_t oj = ow0; oj <= ow1; ++oj) {
        const int64_t k = p * out_plane + oi * g.out_w + oj;
        if (g.mode == kMax) {
          if (argmax[k] == pos) acc += Ld(grad[k]);
          continue;
        }
        const Window win = WindowAt(g, oi, oj);
        if (h < win.h0 || h >= win.h1 || w < win.w0 || w >= win.w1) continue;
        acc += AvgShare(g, win, Ld(grad[k]));
      }
    }
    dx[idx] = St<T>(acc);
  }
}

}  // namespace

cudaError_t PoolForward(DType dtype, const PoolGeometry& geo, const void* x,
                        void* y, int64_t* argmax, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(geo.planes * geo.out_h * geo.out_w, stream,
                  PoolForwardKernel<T>, geo, static_cast<const T*>(x),
                  static_cast<T*>(y), argmax);
  });
}

cudaError_t PoolBackward(DType dtype, const PoolGeometry& geo, const void* g,
                         const int64_t* argmax, void* dx, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(geo.planes * geo.height * geo.width, stream,
                  PoolBackwardKernel<T>, geo, static_cast<const T*>(g), argmax,
                  static_cast<T*>(dx));
  });
}

}  // namespace tandem::cuda::kernels
