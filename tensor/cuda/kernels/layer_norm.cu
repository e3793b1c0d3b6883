// LayerNorm's CUDA kernels (forward and LayerNormBackward), the CPU
// kernels' arithmetic (tensor/ops/layer_norm.cc): row sums in double by one
// block per row in a fixed tree, column sums (dweight, dbias) in double by
// one thread per column walking the rows in order: deterministic. f32 and
// f64 (the op's definition computes f16/bf16 in f32). The host side, which
// registers them in the kernel table, is ops_layer_norm.cc; these entry
// points are declared there.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>(rows < 65535 ? rows : 65535);
}

template <typename T>
__global__ void ForwardKernel(const T* x, const T* weight, const T* bias,
                              int64_t rows, int64_t cols, double eps, T* y,
                              T* mean, T* rstd) {
  __shared__ double shared[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) sum += xr[j];
    const double mu = BlockSum(sum, shared) / static_cast<double>(cols);
    double sq = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const double d = static_cast<double>(xr[j]) - mu;
      sq += d * d;
    }
    const double var = BlockSum(sq, shared) / static_cast<double>(cols);
    const T m = static_cast<T>(mu);
    const T s = static_cast<T>(1 / sqrt(var + eps));
    const T shift = -s * m;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      yr[j] = (xr[j] * s + shift) * (weight != nullptr ? weight[j] : T(1)) +
              (bias != nullptr ? bias[j] : T(0));
    }
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

template <typename T>
__global__ void BackwardInputKernel(const T* dy, const T* x, const T* mean,
                                    const T* rstd, const T* weight,
                                    int64_t rows, int64_t cols, T* dx) {
  __shared__ double shared[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    const T* gr = dy + r * cols;
    const T m = mean[r];
    const T s = rstd[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const double g = static_cast<double>(gr[j]) *
                       (weight != nullptr ? static_cast<double>(weight[j]) : 1);
      sum_g += g;
      sum_gx += g * ((static_cast<double>(xr[j]) - m) * s);
    }
    sum_g = BlockSum(sum_g, shared);
    sum_gx = BlockSum(sum_gx, shared);
    const T c1 = static_cast<T>(s * sum_g / static_cast<double>(cols));
    const T c2 = static_cast<T>(static_cast<double>(s) * s * sum_gx /
                                static_cast<double>(cols));
    T* out = dx + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const T g = weight != nullptr ? gr[j] * weight[j] : gr[j];
      out[j] = s * g - c1 - (xr[j] - m) * c2;
    }
  }
}

template <typename T>
__global__ void BackwardParamsKernel(const T* dy, const T* x, const T* mean,
                                     const T* rstd, int64_t rows, int64_t cols,
                                     T* dweight, T* dbias) {
  TANDEM_CUDA_LOOP(j, cols) {
    double dw = 0, db = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double g = dy[r * cols + j];
      dw += g * ((static_cast<double>(x[r * cols + j]) - mean[r]) * rstd[r]);
      db += g;
    }
    if (dweight != nullptr) dweight[j] = static_cast<T>(dw);
    if (dbias != nullptr) dbias[j] = static_cast<T>(db);
  }
}

}  // namespace

cudaError_t LayerNormForward(DType dtype, const void* x, const void* weight,
                             const void* bias, int64_t rows, int64_t cols,
                             double eps, void* y, void* mean, void* rstd,
                             cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    ForwardKernel<T><<<RowBlocks(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight),
        static_cast<const T*>(bias), rows, cols, eps, static_cast<T*>(y),
        static_cast<T*>(mean), static_cast<T*>(rstd));
    return cudaGetLastError();
  });
}

cudaError_t LayerNormBackward(DType dtype, const void* dy, const void* x,
                              const void* mean, const void* rstd,
                              const void* weight, int64_t rows, int64_t cols,
                              void* dx, void* dweight, void* dbias,
                              cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    if (dx != nullptr && rows > 0) {
      BackwardInputKernel<T><<<RowBlocks(rows), kThreads, 0, stream>>>(
          static_cast<const T*>(dy), static_cast<const T*>(x),
          static_cast<const T*>(mean), static_cast<const T*>(rstd),
          static_cast<const T*>(weight), rows, cols, static_cast<T*>(dx));
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) return err;
    }
    if (dweight == nullptr && dbias == nullptr) return cudaSuccess;
    return Launch(cols, stream, BackwardParamsKernel<T>,
                  static_cast<const T*>(dy), static_cast<const T*>(x),
                  static_cast<const T*>(mean), static_cast<const T*>(rstd),
                  rows, cols, static_cast<T*>(dweight), static_cast<T*>(dbias));
  });
}

}  // namespace tandem::cuda::kernels
