// Internal, for the .cu files only: element types, exact f16/bf16
// conversions, dtype dispatch, launch helpers and a deterministic
// two-pass sum.
//
// f16 and bf16 are handled as raw bits (F16, BF16) with integer-only
// conversions (the reference algorithm of base/half_test.cc), exact whatever
// the device's denormal mode, so device results round exactly like the
// host's base/half.h (cuda_fp16's intrinsics would give other NaN encodings).
// One difference, in NaN payloads only: an f16 signalling NaN read as f32
// stays signalling here and is quieted on the host.
#ifndef TANDEM_TENSOR_CUDA_KERNEL_UTIL_CUH_
#define TANDEM_TENSOR_CUDA_KERNEL_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "base/dtype.h"
#include "tensor/cuda/internal/kernels.h"

namespace tandem::cuda::kernels {

struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};

// ---- Bit-exact conversions (see the header comment).

__device__ inline uint32_t ShiftRightRoundEven(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) return kept + 1u;
  return kept;
}

__device__ inline uint16_t F16FromF32(float value) {
  const uint32_t x = __float_as_uint(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
  if (a >= 0x477FF000u) return sign | 0x7C00u;
  if (a >= 0x38800000u) {
    const uint32_t exp = (a >> 23) - 127 + 15;
    const uint32_t mant = a & 0x7FFFFFu;
    return sign |
           static_cast<uint16_t>(ShiftRightRoundEven((exp << 23) | mant, 13));
  }
  if (a <= 0x33000000u) return sign;
  const uint32_t exp = a >> 23;
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = static_cast<int>(126 - exp);
  return sign | static_cast<uint16_t>(ShiftRightRoundEven(mant, shift));
}

__device__ inline float F32FromF16(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1Fu;
  const uint32_t mant = bits & 0x3FFu;
  if (exp == 0x1Fu) return __uint_as_float(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return __uint_as_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

__device__ inline uint16_t BF16FromF32(float value) {
  const uint32_t x = __float_as_uint(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  const uint32_t bias = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + bias) >> 16);
}

__device__ inline float F32FromBF16(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

// ---- Compute types: float for f16/bf16, the type itself otherwise.
template <typename T>
struct AccOf {
  using type = T;
};
template <>
struct AccOf<F16> {
  using type = float;
};
template <>
struct AccOf<BF16> {
  using type = float;
};
template <typename T>
using Acc = typename AccOf<T>::type;

template <typename T>
inline constexpr bool kIsFloat =
    std::is_floating_point_v<T> || std::is_same_v<T, F16> ||
    std::is_same_v<T, BF16>;

// Load: element -> compute type.
template <typename T>
__device__ inline Acc<T> Ld(T v) {
  return v;
}
template <>
__device__ inline float Ld<F16>(F16 v) {
  return F32FromF16(v.bits);
}
template <>
__device__ inline float Ld<BF16>(BF16 v) {
  return F32FromBF16(v.bits);
}

// Store: compute type -> element (f16/bf16 round to nearest even).
template <typename T>
__device__ inline T St(Acc<T> v) {
  return v;
}
template <>
__device__ inline F16 St<F16>(float v) {
  return F16{F16FromF32(v)};
}
template <>
__device__ inline BF16 St<BF16>(float v) {
  return BF16{BF16FromF32(v)};
}

// A double into element type T the way the CPU narrows it (f16/bf16 via
// float, as c10 does).
template <typename T>
__device__ inline T FromDouble(double v) {
  return St<T>(static_cast<Acc<T>>(v));
}

// A host double rounded to T's compute type the way the CPU rounds a scalar
// to the tensor's dtype (static_cast<T>(s); f16/bf16 scalars stay float).
template <typename T>
inline Acc<T> ScalarAs(double s) {
  return static_cast<Acc<T>>(s);
}

// ---- Dispatch. `f` is called with a value of the element type and
// returns cudaError_t.
template <typename F>
cudaError_t DispatchFloat(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kF16:
      return f(F16{});
    case DType::kBF16:
      return f(BF16{});
    default:
      return cudaErrorInvalidValue;
  }
}

// f32 and f64 only (kernels whose op computes f16/bf16 in f32).
template <typename F>
cudaError_t DispatchF32F64(DType dtype, F&& f) {
  if (dtype == DType::kF64) return f(double{});
  if (dtype == DType::kF32) return f(float{});
  return cudaErrorInvalidValue;
}

template <typename F>
cudaError_t DispatchAll(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kI64:
      return f(int64_t{});
    case DType::kI32:
      return f(int32_t{});
    default:
      return DispatchFloat(dtype, f);
  }
}

// ---- Launching.
inline constexpr int kThreads = 256;

inline unsigned BlocksFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > (int64_t{1} << 20)) blocks = int64_t{1} << 20;  // grid-stride
  return static_cast<unsigned>(blocks);
}

// for (i = this thread's first index; i < n; i += all threads)
#define TANDEM_CUDA_LOOP(i, n)                                          \
  for (int64_t i =                                                      \
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
       i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Launches kernel<<<BlocksFor(n), kThreads>>>(args...) on `stream` unless
// n <= 0; returns the launch error.
template <typename... Params, typename... Args>
cudaError_t Launch(int64_t n, cudaStream_t stream, void (*kernel)(Params...),
                   Args... args) {
  if (n <= 0) return cudaSuccess;
  kernel<<<BlocksFor(n), kThreads, 0, stream>>>(args...);
  return cudaGetLastError();
}

// ---- Deterministic sum in double: `load(i)` for i in [0, n) summed by a
// fixed grid (each thread in index order, then a fixed tree per block),
// then the block sums by one block's fixed tree; `store(total)` runs once.
// Same n, same result, every run.
template <typename Load>
__global__ void ReducePartialsKernel(Load load, int64_t n, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0;
  TANDEM_CUDA_LOOP(i, n) { acc += load(i); }
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      shared[threadIdx.x] += shared[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = shared[0];
}

template <typename Store>
__global__ void ReduceFinishKernel(const double* partials, int count,
                                   Store store) {
  __shared__ double shared[kThreads];
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  shared[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      shared[threadIdx.x] += shared[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) store(shared[0]);
}

// `scratch` holds kReduceScratch doubles.
template <typename Load, typename Store>
cudaError_t ReduceSum(int64_t n, Load load, Store store, double* scratch,
                      cudaStream_t stream) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > kReduceScratch) blocks = kReduceScratch;
  ReducePartialsKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      load, n, scratch);
  ReduceFinishKernel<<<1, kThreads, 0, stream>>>(
      scratch, static_cast<int>(blocks), store);
  return cudaGetLastError();
}

// The fixed-tree sum of every thread's `v` over a block of kThreads
// threads (`shared` holds kThreads doubles); every thread gets the total.
// All threads of the block must call it (it synchronises).
__device__ inline double BlockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) {
      shared[threadIdx.x] += shared[threadIdx.x + s];
    }
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();
  return total;
}

// store(total): dst[0] = (accumulate ? dst[0] : 0) + total / divisor.
template <typename D>
struct StoreScalar {
  D* dst;
  double divisor;
  bool accumulate;
  __device__ void operator()(double total) const {
    const double base = accumulate ? static_cast<double>(Ld(dst[0])) : 0.0;
    dst[0] = FromDouble<D>(base + total / divisor);
  }
};

}  // namespace tandem::cuda::kernels

#endif  // TANDEM_TENSOR_CUDA_KERNEL_UTIL_CUH_
