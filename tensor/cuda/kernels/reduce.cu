// Reductions and along-dim kernels: sums (all, one dim, bias-style), bias
// broadcast, argmax, softmax and log-softmax, forward and backward. Each
// output along a dim is owned by one thread that walks the dim in order,
// as the CPU loop does.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

template <typename T>
struct LoadAsDouble {
  const T* x;
  __device__ double operator()(int64_t i) const {
    return static_cast<double>(Ld(x[i]));
  }
};

template <typename T>
__global__ void SumAllBackwardKernel(const T* g, Acc<T> count, bool mean,
                                     T* out, int64_t n, bool accumulate) {
  const Acc<T> gv = Ld(g[0]);
  const Acc<T> v = mean ? gv / count : gv;
  TANDEM_CUDA_LOOP(i, n) { out[i] = St<T>(accumulate ? Ld(out[i]) + v : v); }
}

template <typename T>
__global__ void SumDimKernel(const T* x, Split s, bool mean, T* out) {
  TANDEM_CUDA_LOOP(idx, s.outer * s.inner) {
    const int64_t o = idx / s.inner, i = idx % s.inner;
    const T* p = x + o * s.size * s.inner + i;
    double acc = 0;
    for (int64_t k = 0; k < s.size; ++k) acc += Ld(p[k * s.inner]);
    out[idx] = FromDouble<T>(mean ? acc / static_cast<double>(s.size) : acc);
  }
}

template <typename T>
__global__ void SumDimBackwardKernel(const T* g, Split s, bool mean, T* out,
                                     bool accumulate) {
  const Acc<T> scale =
      mean ? Acc<T>(1) / static_cast<Acc<T>>(s.size) : Acc<T>(1);
  TANDEM_CUDA_LOOP(idx, s.outer * s.size * s.inner) {
    const int64_t i = idx % s.inner;
    const int64_t o = idx / (s.size * s.inner);
    const Acc<T> gv = Ld(g[o * s.inner + i]);
    const Acc<T> v = mean ? gv * scale : gv;
    out[idx] = St<T>(accumulate ? Ld(out[idx]) + v : v);
  }
}

// One block per middle index m; the block's threads split the (o, i) pairs
// in a fixed way and combine them by a fixed tree: deterministic.
template <typename T>
__global__ void SumOuterInnerKernel(const T* x, int64_t outer, int64_t mid,
                                    int64_t inner, T* out, bool accumulate) {
  __shared__ double shared[kThreads];
  for (int64_t m = blockIdx.x; m < mid; m += gridDim.x) {
    double acc = 0;
    for (int64_t j = threadIdx.x; j < outer * inner; j += kThreads) {
      const int64_t o = j / inner, i = j % inner;
      acc += Ld(x[(o * mid + m) * inner + i]);
    }
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) {
        shared[threadIdx.x] += shared[threadIdx.x + s];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const double base = accumulate ? static_cast<double>(Ld(out[m])) : 0.0;
      out[m] = FromDouble<T>(base + shared[0]);
    }
    __syncthreads();
  }
}

template <typename T>
__global__ void BroadcastMiddleKernel(const T* v, int64_t outer, int64_t mid,
                                      int64_t inner, T* out) {
  TANDEM_CUDA_LOOP(idx, outer * mid * inner) {
    out[idx] = v[(idx / inner) % mid];
  }
}

template <typename T>
__global__ void ArgmaxKernel(const T* x, Split s, int64_t* out) {
  TANDEM_CUDA_LOOP(idx, s.outer * s.inner) {
    const int64_t o = idx / s.inner, i = idx % s.inner;
    const T* p = x + o * s.size * s.inner + i;
    int64_t best = 0;
    auto bv = Ld(p[0]);
    for (int64_t k = 1; k < s.size; ++k) {
      const auto v = Ld(p[k * s.inner]);
      bool better;
      if constexpr (kIsFloat<T>) {
        // NaN wins over everything and the first NaN is kept.
        better = !isnan(bv) && (isnan(v) || v > bv);
      } else {
        better = v > bv;
      }
      if (better) {
        best = k;
        bv = v;
      }
    }
    out[idx] = best;
  }
}

template <typename T>
__global__ void SoftmaxForwardKernel(bool log_out, const T* x, Split s, T* y) {
  using A = Acc<T>;
  TANDEM_CUDA_LOOP(idx, s.outer * s.inner) {
    const int64_t o = idx / s.inner, i = idx % s.inner;
    const int64_t base = o * s.size * s.inner + i;
    A mx = -INFINITY;
    for (int64_t k = 0; k < s.size; ++k) {
      const A v = Ld(x[base + k * s.inner]);
      mx = mx < v ? v : mx;  // std::max: NaN never replaces mx
    }
    // All -inf (or empty): use 0 so exp(x - mx) stays well defined.
    if (!isfinite(mx)) mx = isnan(mx) ? mx : A(0);
    A sum = 0;
    for (int64_t k = 0; k < s.size; ++k) {
      const int64_t j = base + k * s.inner;
      const A e = exp(Ld(x[j]) - mx);
      if (!log_out) y[j] = St<T>(e);
      sum += e;
    }
    if (log_out) {
      const A lse = mx + log(sum);
      for (int64_t k = 0; k < s.size; ++k) {
        const int64_t j = base + k * s.inner;
        y[j] = St<T>(Ld(x[j]) - lse);
      }
    } else {
      for (int64_t k = 0; k < s.size; ++k) {
        const int64_t j = base + k * s.inner;
        y[j] = St<T>(Ld(y[j]) / sum);
      }
    }
  }
}

template <typename T>
__global__ void SoftmaxBackwardKernel(bool log_out, const T* y, const T* g,
                                      Split s, T* out, bool accumulate) {
  using A = Acc<T>;
  TANDEM_CUDA_LOOP(idx, s.outer * s.inner) {
    const int64_t o = idx / s.inner, i = idx % s.inner;
    const int64_t base = o * s.size * s.inner + i;
    // softmax: gx = y (g - sum(g y)); log: gx = g - e^y sum(g)
    A dot = 0;
    for (int64_t k = 0; k < s.size; ++k) {
      const int64_t j = base + k * s.inner;
      dot += log_out ? Ld(g[j]) : Ld(g[j]) * Ld(y[j]);
    }
    for (int64_t k = 0; k < s.size; ++k) {
      const int64_t j = base + k * s.inner;
      const A gv = Ld(g[j]), yv = Ld(y[j]);
      const A v = log_out ? gv - exp(yv) * dot : yv * (gv - dot);
      out[j] = St<T>(accumulate ? Ld(out[j]) + v : v);
    }
  }
}

}  // namespace

cudaError_t SumAll(DType src_dtype, const void* src, int64_t n, double divisor,
                   DType dst_dtype, void* dst, bool accumulate, double* scratch,
                   cudaStream_t stream) {
  return DispatchFloat(src_dtype, [&](auto zs) {
    using S = decltype(zs);
    return DispatchFloat(dst_dtype, [&](auto zd) {
      using D = decltype(zd);
      return ReduceSum(
          n, LoadAsDouble<S>{static_cast<const S*>(src)},
          StoreScalar<D>{static_cast<D*>(dst), divisor, accumulate}, scratch,
          stream);
    });
  });
}

cudaError_t SumAllBackward(DType dtype, const void* g, int64_t n, bool mean,
                           void* out, bool accumulate, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, SumAllBackwardKernel<T>, static_cast<const T*>(g),
                  static_cast<Acc<T>>(n), mean, static_cast<T*>(out), n,
                  accumulate);
  });
}

cudaError_t SumDim(DType dtype, const void* x, const Split& split, bool mean,
                   void* out, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(split.outer * split.inner, stream, SumDimKernel<T>,
                  static_cast<const T*>(x), split, mean, static_cast<T*>(out));
  });
}

cudaError_t SumDimBackward(DType dtype, const void* g, const Split& split,
                           bool mean, void* out, bool accumulate,
                           cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(split.outer * split.size * split.inner, stream,
                  SumDimBackwardKernel<T>, static_cast<const T*>(g), split,
                  mean, static_cast<T*>(out), accumulate);
  });
}

cudaError_t SumOuterInner(DType dtype, const void* x, int64_t outer,
                          int64_t mid, int64_t inner, void* out,
                          bool accumulate, cudaStream_t stream) {
  if (mid <= 0) return cudaSuccess;
  const unsigned blocks =
      static_cast<unsigned>(mid < 65535 ? mid : int64_t{65535});
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    SumOuterInnerKernel<T><<<blocks, kThreads, 0, stream>>>(
        static_cast<const T*>(x), outer, mid, inner, static_cast<T*>(out),
        accumulate);
    return cudaGetLastError();
  });
}

cudaError_t BroadcastMiddle(DType dtype, const void* v, int64_t outer,
                            int64_t mid, int64_t inner, void* out,
                            cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(outer * mid * inner, stream, BroadcastMiddleKernel<T>,
                  static_cast<const T*>(v), outer, mid, inner,
                  static_cast<T*>(out));
  });
}

cudaError_t Argmax(DType dtype, const void* x, const Split& split, int64_t* out,
                   cudaStream_t stream) {
  return DispatchAll(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(split.outer * split.inner, stream, ArgmaxKernel<T>,
                  static_cast<const T*>(x), split, out);
  });
}

cudaError_t SoftmaxForward(DType dtype, bool log, const void* x,
                           const Split& split, void* y, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(split.outer * split.inner, stream, SoftmaxForwardKernel<T>,
                  log, static_cast<const T*>(x), split, static_cast<T*>(y));
  });
}

cudaError_t SoftmaxBackward(DType dtype, bool log, const void* y, const void* g,
                            const Split& split, void* out, bool accumulate,
                            cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(split.outer * split.inner, stream, SoftmaxBackwardKernel<T>,
                  log, static_cast<const T*>(y), static_cast<const T*>(g),
                  split, static_cast<T*>(out), accumulate);
  });
}

}  // namespace tandem::cuda::kernels
