// ScaledDotProductAttention's CUDA kernels: one thread per row of one
// (batch, head), sums in double, no atomics (the same bits every run). The
// host side, which registers them in the kernel table, is
// ops_attention.cc; these entry points are declared there. f32 and f64
// only (the op computes f16/bf16 in f32).
//
// Memory: beyond the inputs and outputs, the [B, H, T, T] probabilities
// (written by the forward, read by the backward) and, in the backward, a
// double scratch of [B, H, T] + 2 x [B, H, T, head_dim]; never a second
// T x T matrix.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

// Thread (h, i): probs[h, i, :] and y[h, i, :].
template <typename T>
__global__ void AttentionForwardKernel(const T* q, const T* k, const T* v,
                                       const T* mask, int64_t bh, int64_t t,
                                       int64_t hd, bool causal, double scale,
                                       T* probs, T* y) {
  const T scale_t = static_cast<T>(scale);
  TANDEM_CUDA_LOOP(row, bh * t) {
    const int64_t h = row / t, i = row % t;
    const int64_t jn = causal ? i + 1 : t;
    const T* qi = q + row * hd;
    const T* kh = k + h * t * hd;
    const T* vh = v + h * t * hd;
    T* p = probs + row * t;
    const T* m = mask != nullptr ? mask + row * t : nullptr;
    double mx = -INFINITY;
    for (int64_t j = 0; j < jn; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < hd; ++d) {
        dot += static_cast<double>(qi[d]) * static_cast<double>(kh[j * hd + d]);
      }
      const T s = static_cast<T>(dot) * scale_t;  // as the CPU kernel
      p[j] = s;
      mx = fmax(mx, static_cast<double>(s));
    }
    double sum = 0;
    for (int64_t j = 0; j < jn; ++j) sum += exp(static_cast<double>(p[j]) - mx);
    for (int64_t j = 0; j < t; ++j) {
      p[j] = j < jn ? static_cast<T>(exp(static_cast<double>(p[j]) - mx) / sum)
                    : T(0);
    }
    for (int64_t d = 0; d < hd; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < jn; ++j) {
        const double a = m != nullptr ? static_cast<double>(p[j] * m[j])
                                      : static_cast<double>(p[j]);
        acc += a * static_cast<double>(vh[j * hd + d]);
      }
      y[row * hd + d] = static_cast<T>(acc);
    }
  }
}

// dP[i, j] = (gy_i . v_j) * mask[i, j].
template <typename T>
__device__ double AttentionDp(const T* gyi, const T* vj, const T* m, int64_t j,
                              int64_t hd) {
  double da = 0;
  for (int64_t d = 0; d < hd; ++d) {
    da += static_cast<double>(gyi[d]) * static_cast<double>(vj[d]);
  }
  return m != nullptr ? da * static_cast<double>(m[j]) : da;
}

// Thread (h, i): r[h, i] = sum_j P dP, then gq[h, i, :].
template <typename T>
__global__ void AttentionBackwardRowsKernel(const T* gy, const T* k, const T* v,
                                            const T* probs, const T* mask,
                                            int64_t bh, int64_t t, int64_t hd,
                                            bool causal, double scale,
                                            double* r, double* acc, T* gq) {
  TANDEM_CUDA_LOOP(row, bh * t) {
    const int64_t h = row / t, i = row % t;
    const int64_t jn = causal ? i + 1 : t;
    const T* gyi = gy + row * hd;
    const T* kh = k + h * t * hd;
    const T* vh = v + h * t * hd;
    const T* p = probs + row * t;
    const T* m = mask != nullptr ? mask + row * t : nullptr;
    double ri = 0;
    for (int64_t j = 0; j < jn; ++j) {
      ri += static_cast<double>(p[j]) * AttentionDp(gyi, vh + j * hd, m, j, hd);
    }
    r[row] = ri;
    double* a = acc + row * hd;
    for (int64_t d = 0; d < hd; ++d) a[d] = 0;
    for (int64_t j = 0; j < jn; ++j) {
      const double ds = static_cast<double>(p[j]) *
                        (AttentionDp(gyi, vh + j * hd, m, j, hd) - ri) * scale;
      for (int64_t d = 0; d < hd; ++d) {
        a[d] += ds * static_cast<double>(kh[j * hd + d]);
      }
    }
    for (int64_t d = 0; d < hd; ++d) gq[row * hd + d] = static_cast<T>(a[d]);
  }
}

// Thread (h, j): gk[h, j, :] and gv[h, j, :] over the rows i that see j.
template <typename T>
__global__ void AttentionBackwardColumnsKernel(
    const T* gy, const T* q, const T* v, const T* probs, const T* mask,
    int64_t bh, int64_t t, int64_t hd, bool causal, double scale,
    const double* r, double* acc_k, double* acc_v, T* gk, T* gv) {
  TANDEM_CUDA_LOOP(col, bh * t) {
    const int64_t h = col / t, j = col % t;
    const T* vj = v + col * hd;
    double* ak = acc_k + col * hd;
    double* av = acc_v + col * hd;
    for (int64_t d = 0; d < hd; ++d) ak[d] = av[d] = 0;
    for (int64_t i = causal ? j : 0; i < t; ++i) {
      const int64_t row = h * t + i;
      const T* m = mask != nullptr ? mask + row * t : nullptr;
      const double pij = static_cast<double>(probs[row * t + j]);
      const double ds =
          pij * (AttentionDp(gy + row * hd, vj, m, j, hd) - r[row]) * scale;
      const double a =
          m != nullptr ? static_cast<double>(probs[row * t + j] * m[j]) : pij;
      for (int64_t d = 0; d < hd; ++d) {
        ak[d] += ds * static_cast<double>(q[row * hd + d]);
        av[d] += a * static_cast<double>(gy[row * hd + d]);
      }
    }
    for (int64_t d = 0; d < hd; ++d) {
      gk[col * hd + d] = static_cast<T>(ak[d]);
      gv[col * hd + d] = static_cast<T>(av[d]);
    }
  }
}

}  // namespace

cudaError_t AttentionForward(DType dtype, const void* q, const void* k,
                             const void* v, const void* mask, int64_t bh,
                             int64_t t, int64_t hd, bool causal, double scale,
                             void* probs, void* y, cudaStream_t stream) {
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(bh * t, stream, AttentionForwardKernel<T>,
                  static_cast<const T*>(q), static_cast<const T*>(k),
                  static_cast<const T*>(v), static_cast<const T*>(mask), bh, t,
                  hd, causal, scale, static_cast<T*>(probs),
                  static_cast<T*>(y));
  });
}

cudaError_t AttentionBackward(DType dtype, const void* gy, const void* q,
                              const void* k, const void* v, const void* probs,
                              const void* mask, int64_t bh, int64_t t,
                              int64_t hd, bool causal, double scale,
                              double* scratch, void* gq, void* gk, void* gv,
                              cudaStream_t stream) {
  double* r = scratch;
  double* acc_a = r + bh * t;
  double* acc_b = acc_a + bh * t * hd;
  return DispatchF32F64(dtype, [&](auto z) {
    using T = decltype(z);
    cudaError_t e =
        Launch(bh * t, stream, AttentionBackwardRowsKernel<T>,
               static_cast<const T*>(gy), static_cast<const T*>(k),
               static_cast<const T*>(v), static_cast<const T*>(probs),
               static_cast<const T*>(mask), bh, t, hd, causal, scale, r, acc_a,
               static_cast<T*>(gq));
    if (e != cudaSuccess) return e;
    // acc_a is free again once the rows kernel is done (stream order).
    return Launch(bh * t, stream, AttentionBackwardColumnsKernel<T>,
                  static_cast<const T*>(gy), static_cast<const T*>(q),
                  static_cast<const T*>(v), static_cast<const T*>(probs),
                  static_cast<const T*>(mask), bh, t, hd, causal, scale,
                  static_cast<const double*>(r), acc_a, acc_b,
                  static_cast<T*>(gk), static_cast<T*>(gv));
  });
}

}  // namespace tandem::cuda::kernels
