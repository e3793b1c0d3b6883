// Elementwise kernels: fill, dtype conversion, in-place updates, binary ops
// with broadcasting and unary functions, forward and backward.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/kernels/kernel_util.cuh"

namespace tandem::cuda::kernels {
namespace {

// ---- Fill.
template <typename U>
__global__ void FillKernel(U* dst, int64_t n, U value) {
  TANDEM_CUDA_LOOP(i, n) { dst[i] = value; }
}

// ---- Convert (tensor/convert.h: widen losslessly, then narrow).
template <typename S>
__device__ auto Widen(S v) {
  if constexpr (kIsFloat<S>) {
    return static_cast<double>(Ld(v));
  } else {
    return static_cast<int64_t>(v);
  }
}

template <typename D>
__device__ D FloatToInt(double v) {
  if (isnan(v)) return 0;
  constexpr double kLimit =
      std::is_same_v<D, int64_t> ? 9223372036854775808.0 : 2147483648.0;
  if (v >= kLimit) {
    return std::is_same_v<D, int64_t> ? static_cast<D>(INT64_MAX)
                                      : static_cast<D>(INT32_MAX);
  }
  if (v < -kLimit) {
    return std::is_same_v<D, int64_t> ? static_cast<D>(INT64_MIN)
                                      : static_cast<D>(INT32_MIN);
  }
  return static_cast<D>(v);
}

template <typename D, typename W>
__device__ D Narrow(W w) {
  if constexpr (std::is_same_v<D, F16> || std::is_same_v<D, BF16>) {
    return St<D>(static_cast<float>(w));
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(w);
  } else if constexpr (std::is_floating_point_v<W>) {
    return FloatToInt<D>(w);
  } else {
    return static_cast<D>(w);
  }
}

template <typename S, typename D>
__global__ void ConvertKernel(const S* src, D* dst, int64_t n) {
  TANDEM_CUDA_LOOP(i, n) { dst[i] = Narrow<D>(Widen(src[i])); }
}

// ---- In place.
template <typename T>
__global__ void AddInPlaceKernel(T* dst, const T* src, Acc<T> alpha, bool unit,
                                 int64_t n) {
  TANDEM_CUDA_LOOP(i, n) {
    const Acc<T> s = Ld(src[i]);
    dst[i] = St<T>(unit ? Ld(dst[i]) + s : Ld(dst[i]) + alpha * s);
  }
}

template <typename T>
__global__ void ScaleKernel(T* dst, Acc<T> factor, int64_t n) {
  TANDEM_CUDA_LOOP(i, n) { dst[i] = St<T>(Ld(dst[i]) * factor); }
}

// ---- Binary.
template <typename A>
__device__ A ApplyBinary(Binary op, A x, A y) {
  switch (op) {
    case Binary::kAdd:
      return x + y;
    case Binary::kSub:
      return x - y;
    case Binary::kMul:
      return x * y;
    case Binary::kDiv:
      return x / y;
  }
  return x;
}

// d(a op b)/d(operand which) * g, as the CPU's BackwardLoop lambdas.
template <typename A>
__device__ A BinaryGrad(Binary op, int which, A av, A bv, A gv) {
  switch (op) {
    case Binary::kAdd:
      return gv;
    case Binary::kSub:
      return which == 0 ? gv : -gv;
    case Binary::kMul:
      return which == 0 ? gv * bv : gv * av;
    case Binary::kDiv:
      return which == 0 ? gv / bv : -gv * av / (bv * bv);
  }
  return gv;
}

template <typename T>
__global__ void BinaryForwardKernel(Binary op, Broadcast p, const T* a,
                                    const T* b, T* out) {
  TANDEM_CUDA_LOOP(idx, p.outer * p.inner) {
    const int64_t o = idx / p.inner, i = idx % p.inner;
    out[idx] = St<T>(ApplyBinary(op, Ld(a[o * p.a_outer + i * p.a_inner]),
                                 Ld(b[o * p.b_outer + i * p.b_inner])));
  }
}

// Operands the derivative does not read may be null: read 0 instead.
template <typename T>
__device__ Acc<T> LdOr0(const T* p, int64_t i) {
  return p != nullptr ? Ld(p[i]) : Acc<T>(0);
}

template <typename T>
__device__ Acc<T> GradAt(Binary op, int which, const Broadcast& p, const T* a,
                         const T* b, const T* g, int64_t o, int64_t i) {
  return BinaryGrad(op, which, LdOr0(a, o * p.a_outer + i * p.a_inner),
                    LdOr0(b, o * p.b_outer + i * p.b_inner),
                    Ld(g[o * p.inner + i]));
}

// Dense operand: one output per element.
template <typename T>
__global__ void BinaryBackwardDenseKernel(Binary op, int which, Broadcast p,
                                          const T* a, const T* b, const T* g,
                                          T* out, bool accumulate) {
  TANDEM_CUDA_LOOP(idx, p.outer * p.inner) {
    const Acc<T> d =
        GradAt(op, which, p, a, b, g, idx / p.inner, idx % p.inner);
    out[idx] = St<T>(accumulate ? Ld(out[idx]) + d : d);
  }
}

// Row operand: out[i] summed over o in order (the CPU's order and type).
template <typename T>
__global__ void BinaryBackwardRowKernel(Binary op, int which, Broadcast p,
                                        const T* a, const T* b, const T* g,
                                        T* out, bool accumulate) {
  TANDEM_CUDA_LOOP(i, p.inner) {
    Acc<T> acc = accumulate ? Ld(out[i]) : Acc<T>(0);
    for (int64_t o = 0; o < p.outer; ++o) {
      acc += GradAt(op, which, p, a, b, g, o, i);
    }
    out[i] = St<T>(acc);
  }
}

template <typename T>
struct BinaryGradLoad {
  Binary op;
  int which;
  Broadcast p;
  const T* a;
  const T* b;
  const T* g;
  __device__ double operator()(int64_t idx) const {
    return static_cast<double>(
        GradAt(op, which, p, a, b, g, idx / p.inner, idx % p.inner));
  }
};

// ---- Unary.
template <typename A>
__device__ A ApplyUnary(Unary op, A v, A s) {
  switch (op) {
    case Unary::kNeg:
      return -v;
    case Unary::kRelu:
      return v < A(0) ? A(0) : v;  // NaN stays NaN
    case Unary::kSigmoid: {
      // Never exponentiates a large positive number.
      if (v >= A(0)) return A(1) / (A(1) + exp(-v));
      const A e = exp(v);
      return e / (A(1) + e);
    }
    case Unary::kTanh:
      return tanh(v);
    case Unary::kExp:
      return exp(v);
    case Unary::kLog:
      return log(v);
    case Unary::kAddScalar:
      return v + s;
    case Unary::kSubScalar:
      return v - s;
    case Unary::kMulScalar:
      return v * s;
    case Unary::kDivScalar:
      return v / s;
  }
  return v;
}

template <typename A>
__device__ A UnaryGrad(Unary op, A x, A y, A g, A s) {
  switch (op) {
    case Unary::kNeg:
      return -g;
    case Unary::kRelu:
      return x > A(0) ? g : A(0);
    case Unary::kSigmoid:
      return g * y * (A(1) - y);
    case Unary::kTanh:
      return g * (A(1) - y * y);
    case Unary::kExp:
      return g * y;
    case Unary::kLog:
      return g / x;
    case Unary::kAddScalar:
    case Unary::kSubScalar:
      return g;
    case Unary::kMulScalar:
      return g * s;
    case Unary::kDivScalar:
      return g / s;
  }
  return g;
}

template <typename T>
__global__ void UnaryForwardKernel(Unary op, Acc<T> s, const T* x, T* y,
                                   int64_t n) {
  TANDEM_CUDA_LOOP(i, n) { y[i] = St<T>(ApplyUnary(op, Ld(x[i]), s)); }
}

template <typename T>
__global__ void UnaryBackwardKernel(Unary op, Acc<T> s, const T* x, const T* y,
                                    const T* g, T* out, int64_t n,
                                    bool accumulate) {
  TANDEM_CUDA_LOOP(i, n) {
    const Acc<T> d = UnaryGrad(op, LdOr0(x, i), LdOr0(y, i), Ld(g[i]), s);
    out[i] = St<T>(accumulate ? Ld(out[i]) + d : d);
  }
}

}  // namespace

cudaError_t Fill(void* dst, int64_t n, int64_t elem_size, uint64_t pattern,
                 cudaStream_t stream) {
  switch (elem_size) {
    case 1:
      return Launch(n, stream, FillKernel<uint8_t>, static_cast<uint8_t*>(dst),
                    n, static_cast<uint8_t>(pattern));
    case 2:
      return Launch(n, stream, FillKernel<uint16_t>,
                    static_cast<uint16_t*>(dst), n,
                    static_cast<uint16_t>(pattern));
    case 4:
      return Launch(n, stream, FillKernel<uint32_t>,
                    static_cast<uint32_t*>(dst), n,
                    static_cast<uint32_t>(pattern));
    case 8:
      return Launch(n, stream, FillKernel<uint64_t>,
                    static_cast<uint64_t*>(dst), n, pattern);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t Convert(const void* src, DType src_dtype, void* dst,
                    DType dst_dtype, int64_t n, cudaStream_t stream) {
  return DispatchAll(src_dtype, [&](auto s) {
    using S = decltype(s);
    return DispatchAll(dst_dtype, [&](auto d) {
      using D = decltype(d);
      return Launch(n, stream, ConvertKernel<S, D>, static_cast<const S*>(src),
                    static_cast<D*>(dst), n);
    });
  });
}

cudaError_t AddInPlace(DType dtype, void* dst, const void* src, double alpha,
                       int64_t n, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, AddInPlaceKernel<T>, static_cast<T*>(dst),
                  static_cast<const T*>(src), ScalarAs<T>(alpha), alpha == 1.0,
                  n);
  });
}

cudaError_t Scale(DType dtype, void* dst, double factor, int64_t n,
                  cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, ScaleKernel<T>, static_cast<T*>(dst),
                  ScalarAs<T>(factor), n);
  });
}

cudaError_t BinaryForward(Binary op, DType dtype, const Broadcast& plan,
                          const void* a, const void* b, void* out,
                          cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(plan.outer * plan.inner, stream, BinaryForwardKernel<T>, op,
                  plan, static_cast<const T*>(a), static_cast<const T*>(b),
                  static_cast<T*>(out));
  });
}

cudaError_t BinaryBackward(Binary op, int which, DType dtype,
                           const Broadcast& plan, const void* a, const void* b,
                           const void* g, void* out, bool accumulate,
                           double* scratch, cudaStream_t stream) {
  const int64_t x_outer = which == 0 ? plan.a_outer : plan.b_outer;
  const int64_t x_inner = which == 0 ? plan.a_inner : plan.b_inner;
  return DispatchFloat(dtype, [&](auto z) -> cudaError_t {
    using T = decltype(z);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    const T* pg = static_cast<const T*>(g);
    T* po = static_cast<T*>(out);
    if (x_outer == 0 && x_inner == 0) {  // one element: sum of everything
      return ReduceSum(plan.outer * plan.inner,
                       BinaryGradLoad<T>{op, which, plan, pa, pb, pg},
                       StoreScalar<T>{po, 1.0, accumulate}, scratch, stream);
    }
    if (x_outer == 0 && plan.outer != 1) {  // a row repeated over outer
      return Launch(plan.inner, stream, BinaryBackwardRowKernel<T>, op, which,
                    plan, pa, pb, pg, po, accumulate);
    }
    return Launch(plan.outer * plan.inner, stream, BinaryBackwardDenseKernel<T>,
                  op, which, plan, pa, pb, pg, po, accumulate);
  });
}

cudaError_t UnaryForward(Unary op, DType dtype, double scalar, const void* x,
                         void* y, int64_t n, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, UnaryForwardKernel<T>, op, ScalarAs<T>(scalar),
                  static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}

cudaError_t UnaryBackward(Unary op, DType dtype, double scalar, const void* x,
                          const void* y, const void* g, void* out, int64_t n,
                          bool accumulate, cudaStream_t stream) {
  return DispatchFloat(dtype, [&](auto z) {
    using T = decltype(z);
    return Launch(n, stream, UnaryBackwardKernel<T>, op, ScalarAs<T>(scalar),
                  static_cast<const T*>(x), static_cast<const T*>(y),
                  static_cast<const T*>(g), static_cast<T*>(out), n,
                  accumulate);
  });
}

}  // namespace tandem::cuda::kernels
