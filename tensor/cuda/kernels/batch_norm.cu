// BatchNorm's CUDA kernels, one per row of tensor/dispatch/op_kernels.h, with
// the CPU kernels' arithmetic (tensor/ops/batch_norm.cc): channel sums in
// double, by one block per channel in a fixed order (deterministic);
// per-channel and elementwise formulas in the dtype. f32 and f64 only (the
// op's definition computes f16/bf16 in f32). The host side, which
// registers them in the kernel table, is ops_batch_norm.cc; these entry
// points are declared there.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

// Element j of channel c's values (n * inner + i).
__device__ inline int64_t At(int64_t c, int64_t j, int64_t channels,
                             int64_t inner) {
  const int64_t n = j / inner, i = j % inner;
  return (n * channels + c) * inner + i;
}

template <typename T>
__global__ void StatsKernel(const T* x, int64_t batch, int64_t channels,
                            int64_t inner, T* mean, T* var) {
  __shared__ double shared[kThreads];
  const int64_t count = batch * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < count; j += kThreads) {
      sum += x[At(c, j, channels, inner)];
    }
    const T m =
        static_cast<T>(BlockSum(sum, shared) / static_cast<double>(count));
    double var_sum = 0;
    for (int64_t j = threadIdx.x; j < count; j += kThreads) {
      const T d = x[At(c, j, channels, inner)] - m;
      var_sum += d * d;
    }
    var_sum = BlockSum(var_sum, shared);
    if (threadIdx.x == 0) {
      mean[c] = m;
      var[c] = static_cast<T>(var_sum) / static_cast<T>(count);
    }
  }
}

template <typename T>
__global__ void GatherStatsKernel(const T* means, const T* vars,
                                  const T* counts, int64_t groups,
                                  int64_t channels, T* running_mean,
                                  T* running_var, double momentum, double eps,
                                  T* mean, T* invstd) {
  TANDEM_CUDA_LOOP(c, channels) {
    double n = counts[0];
    double mu = means[c];
    double m2 = static_cast<double>(vars[c]) * n;
    for (int64_t g = 1; g < groups; ++g) {
      const double ng = counts[g];
      const double delta = static_cast<double>(means[g * channels + c]) - mu;
      const double total = n + ng;
      mu += delta * ng / total;
      m2 += static_cast<double>(vars[g * channels + c]) * ng +
            delta * delta * n * ng / total;
      n = total;
    }
    const double v = m2 / n;
    mean[c] = static_cast<T>(mu);
    invstd[c] = static_cast<T>(v == 0 && eps == 0 ? 0.0 : 1.0 / sqrt(v + eps));
    if (running_mean != nullptr) {
      running_mean[c] =
          static_cast<T>(momentum * mu + (1 - momentum) * running_mean[c]);
      running_var[c] = static_cast<T>(momentum * (v * n / (n - 1)) +
                                      (1 - momentum) * running_var[c]);
    }
  }
}

template <typename T>
__global__ void ElemtKernel(const T* x, const T* weight, const T* bias,
                            const T* mean, const T* invstd, int64_t channels,
                            int64_t inner, int64_t n, T* y) {
  TANDEM_CUDA_LOOP(idx, n) {
    const int64_t c = (idx / inner) % channels;
    const T w = weight != nullptr ? weight[c] : T(1);
    const T b = bias != nullptr ? bias[c] : T(0);
    const T a = invstd[c] * w;
    const T shift = b - mean[c] * a;
    y[idx] = x[idx] * a + shift;
  }
}

template <typename T>
__global__ void BackwardReduceKernel(const T* dy, const T* x, const T* mean,
                                     int64_t batch, int64_t channels,
                                     int64_t inner, T* sum_dy, T* sum_dy_xmu) {
  __shared__ double shared[kThreads];
  const int64_t count = batch * inner;
  for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    const T m = mean[c];
    double sum = 0, dot = 0;
    for (int64_t j = threadIdx.x; j < count; j += kThreads) {
      const int64_t k = At(c, j, channels, inner);
      sum += dy[k];
      dot += (x[k] - m) * dy[k];
    }
    sum = BlockSum(sum, shared);
    dot = BlockSum(dot, shared);
    if (threadIdx.x == 0) {
      sum_dy[c] = static_cast<T>(sum);
      sum_dy_xmu[c] = static_cast<T>(dot);
    }
  }
}

template <typename T>
__global__ void BackwardElemtKernel(const T* dy, const T* x, const T* mean,
                                    const T* invstd, const T* weight,
                                    const T* sum_dy, const T* sum_dy_xmu,
                                    T count, int64_t channels, int64_t inner,
                                    int64_t n, T* dx) {
  TANDEM_CUDA_LOOP(idx, n) {
    const int64_t c = (idx / inner) % channels;
    const T w = weight != nullptr ? weight[c] : T(1);
    const T s = invstd[c];
    if (sum_dy != nullptr) {
      const T k = sum_dy_xmu[c] * s * s / count;
      const T grad_mean = sum_dy[c] / count;
      dx[idx] = (dy[idx] - grad_mean - (x[idx] - mean[c]) * k) * s * w;
    } else {
      dx[idx] = dy[idx] * s * w;
    }
  }
}

template <typename T>
__global__ void InvstdKernel(const T* var, T eps, int64_t n, T* out) {
  TANDEM_CUDA_LOOP(c, n) { out[c] = T(1) / sqrt(var[c] + eps); }
}

unsigned ChannelBlocks(int64_t channels) {
  return static_cast<unsigned>(channels < 65535 ? channels : 65535);
}

}  // namespace

cudaError_t BatchNormStats(DType dtype, const void* x, int64_t batch,
                           int64_t channels, int64_t inner, void* mean,
                           void* var, cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    StatsKernel<T><<<ChannelBlocks(channels), kThreads, 0, stream>>>(
        static_cast<const T*>(x), batch, channels, inner, static_cast<T*>(mean),
        static_cast<T*>(var));
    return cudaGetLastError();
  });
}

cudaError_t BatchNormGatherStats(DType dtype, const void* means,
                                 const void* vars, const void* counts,
                                 int64_t groups, int64_t channels,
                                 void* running_mean, void* running_var,
                                 double momentum, double eps, void* mean,
                                 void* invstd, cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(
        channels, stream, GatherStatsKernel<T>, static_cast<const T*>(means),
        static_cast<const T*>(vars), static_cast<const T*>(counts), groups,
        channels, static_cast<T*>(running_mean), static_cast<T*>(running_var),
        momentum, eps, static_cast<T*>(mean), static_cast<T*>(invstd));
  });
}

cudaError_t BatchNormElemt(DType dtype, const void* x, const void* weight,
                           const void* bias, const void* mean,
                           const void* invstd, int64_t channels, int64_t inner,
                           int64_t n, void* y, cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, ElemtKernel<T>, static_cast<const T*>(x),
                  static_cast<const T*>(weight), static_cast<const T*>(bias),
                  static_cast<const T*>(mean), static_cast<const T*>(invstd),
                  channels, inner, n, static_cast<T*>(y));
  });
}

cudaError_t BatchNormBackwardReduce(DType dtype, const void* dy, const void* x,
                                    const void* mean, int64_t batch,
                                    int64_t channels, int64_t inner,
                                    void* sum_dy, void* sum_dy_xmu,
                                    cudaStream_t stream) {
  if (channels <= 0) return cudaSuccess;
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    BackwardReduceKernel<T><<<ChannelBlocks(channels), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x),
        static_cast<const T*>(mean), batch, channels, inner,
        static_cast<T*>(sum_dy), static_cast<T*>(sum_dy_xmu));
    return cudaGetLastError();
  });
}

cudaError_t BatchNormBackwardElemt(DType dtype, const void* dy, const void* x,
                                   const void* mean, const void* invstd,
                                   const void* weight, const void* sum_dy,
                                   const void* sum_dy_xmu, double count,
                                   int64_t channels, int64_t inner, int64_t n,
                                   void* dx, cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, BackwardElemtKernel<T>, static_cast<const T*>(dy),
                  static_cast<const T*>(x), static_cast<const T*>(mean),
                  static_cast<const T*>(invstd), static_cast<const T*>(weight),
                  static_cast<const T*>(sum_dy),
                  static_cast<const T*>(sum_dy_xmu), static_cast<T>(count),
                  channels, inner, n, static_cast<T*>(dx));
  });
}

cudaError_t BatchNormInvstd(DType dtype, const void* var, double eps, int64_t n,
                            void* out, cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, InvstdKernel<T>, static_cast<const T*>(var),
                  static_cast<T>(eps), n, static_cast<T*>(out));
  });
}

}  // namespace tandem::cuda::kernels
