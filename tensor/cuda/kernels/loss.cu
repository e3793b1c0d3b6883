// Loss kernels: cross-entropy from logits (one thread per row, as the CPU
// loop) and the pieces of the mean squared error.
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

template <typename T>
__global__ void CrossEntropyForwardKernel(const T* logits,
                                          const int64_t* labels, int64_t n,
                                          int64_t c, int64_t ignore_index,
                                          T* probs, double* row_loss,
                                          double* counted,
                                          unsigned long long* first_bad) {
  using A = Acc<T>;
  TANDEM_CUDA_LOOP(r, n) {
    const int64_t label = labels[r];
    counted[r] = label == ignore_index ? 0.0 : 1.0;
    if (label == ignore_index) {
      // Adds nothing; its probabilities are never read.
      row_loss[r] = 0;
      continue;
    }
    if (label < 0 || label >= c) {
      // Reported by the caller; never read out of bounds.
      atomicMin(first_bad, static_cast<unsigned long long>(r));
      row_loss[r] = NAN;
      continue;
    }
    const T* row = logits + r * c;
    T* prow = probs + r * c;
    A mx = -INFINITY;
    for (int64_t k = 0; k < c; ++k) {
      const A v = Ld(row[k]);
      mx = mx < v ? v : mx;  // std::max: NaN never replaces mx
    }
    A sum = 0;
    for (int64_t k = 0; k < c; ++k) {
      const A e = exp(Ld(row[k]) - mx);
      prow[k] = St<T>(e);
      sum += e;
    }
    for (int64_t k = 0; k < c; ++k) prow[k] = St<T>(Ld(prow[k]) / sum);
    // -log softmax[label] = logsumexp - x[label]
    row_loss[r] = static_cast<double>(mx + log(sum) - Ld(row[label]));
  }
}

template <typename T>
__global__ void CrossEntropyBackwardKernel(
    const T* probs, const int64_t* labels, const T* g, int64_t n, int64_t c,
    int64_t ignore_index, bool mean, double counted, T* out, bool accumulate) {
  using A = Acc<T>;
  const A scale = mean ? Ld(g[0]) / static_cast<A>(counted) : Ld(g[0]);
  TANDEM_CUDA_LOOP(j, n * c) {
    const int64_t r = j / c, k = j % c;
    const A v = labels[r] == ignore_index
                    ? A(0)
                    : scale * (Ld(probs[j]) - (k == labels[r] ? A(1) : A(0)));
    out[j] = St<T>(accumulate ? Ld(out[j]) + v : v);
  }
}

template <typename T>
__global__ void SquaredDiffKernel(const T* p, const T* t, int64_t n,
                                  double* sq) {
  TANDEM_CUDA_LOOP(i, n) {
    const double d =
        static_cast<double>(Ld(p[i])) - static_cast<double>(Ld(t[i]));
    sq[i] = d * d;
  }
}

template <typename T>
__global__ void MseBackwardKernel(const T* p, const T* t, const T* g, int64_t n,
                                  bool negate, T* out, bool accumulate) {
  using A = Acc<T>;
  // d/dp = 2 (p - t) / n; d/dt = -that.
  const A scale = A(2) * Ld(g[0]) / static_cast<A>(n);
  const A sign = negate ? A(-1) : A(1);
  TANDEM_CUDA_LOOP(i, n) {
    const A v = sign * scale * (Ld(p[i]) - Ld(t[i]));
    out[i] = St<T>(accumulate ? Ld(out[i]) + v : v);
  }
}

}  // namespace

cudaError_t CrossEntropyForward(DType dtype, const void* logits,
                                const int64_t* labels, int64_t n, int64_t c,
                                int64_t ignore_index, void* probs,
                                double* row_loss, double* counted,
                                int64_t* first_bad, cudaStream_t stream) {
  static_assert(sizeof(unsigned long long) == sizeof(int64_t));
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    // Indices are >= 0, so the unsigned minimum is the signed one.
    return Launch(n, stream, CrossEntropyForwardKernel<T>,
                  static_cast<const T*>(logits), labels, n, c, ignore_index,
                  static_cast<T*>(probs), row_loss, counted,
                  reinterpret_cast<unsigned long long*>(first_bad));
  });
}

cudaError_t CrossEntropyBackward(DType dtype, const void* probs,
                                 const int64_t* labels, const void* g,
                                 int64_t n, int64_t c, int64_t ignore_index,
                                 bool mean, double counted, void* out,
                                 bool accumulate, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n * c, stream, CrossEntropyBackwardKernel<T>,
                  static_cast<const T*>(probs), labels,
                  static_cast<const T*>(g), n, c, ignore_index, mean, counted,
                  static_cast<T*>(out), accumulate);
  });
}

cudaError_t SquaredDiff(DType dtype, const void* p, const void* t, int64_t n,
                        double* sq, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, SquaredDiffKernel<T>, static_cast<const T*>(p),
                  static_cast<const T*>(t), n, sq);
  });
}

cudaError_t MseBackward(DType dtype, const void* p, const void* t,
                        const void* g, int64_t n, bool negate, void* out,
                        bool accumulate, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, MseBackwardKernel<T>, static_cast<const T*>(p),
                  static_cast<const T*>(t), static_cast<const T*>(g), n, negate,
                  static_cast<T*>(out), accumulate);
  });
}

}  // namespace tandem::cuda::kernels
