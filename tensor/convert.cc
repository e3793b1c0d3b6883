#include "tensor/convert.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace tandem::internal {
namespace {

// Every source type widened to a common representation that loses nothing:
// floats (and f16/bf16) to double, integers to int64_t.
template <typename S>
auto Widen(S v) {
  if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
    return static_cast<double>(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<S>) {
    return static_cast<double>(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

template <typename D>
D FloatToInt(double v) {
  if (std::isnan(v)) return 0;
  // 2^63 and 2^31 are exact in double; anything >= them is out of range.
  constexpr double kLimit =
      std::is_same_v<D, int64_t> ? 9223372036854775808.0 : 2147483648.0;
  if (v >= kLimit) return std::numeric_limits<D>::max();
  if (v < -kLimit) return std::numeric_limits<D>::min();
  return static_cast<D>(v);  // truncates toward zero, in range
}

template <typename D, typename W>
D Narrow(W w) {
  if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    return D(static_cast<float>(w));  // via float, as c10 does
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(w);
  } else if constexpr (std::is_floating_point_v<W>) {
    return FloatToInt<D>(w);
  } else {
    return static_cast<D>(w);
  }
}

template <typename S, typename D>
void ConvertTyped(const S* src, D* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Narrow<D>(Widen(src[i]));
}

template <typename F>
void DispatchAll(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kF16:
      return f(Half{});
    case DType::kBF16:
      return f(BFloat16{});
    case DType::kI64:
      return f(int64_t{});
    case DType::kI32:
      return f(int32_t{});
    case DType::kU8:  // comm's byte dtype; tensors are not created with it
      return;
  }
}

}  // namespace

void ConvertElements(const void* src, DType src_dtype, void* dst,
                     DType dst_dtype, int64_t n) {
  if (n <= 0) return;
  if (src_dtype == dst_dtype) {
    if (src != dst) {
      std::memcpy(dst, src, static_cast<size_t>(n * DTypeSize(src_dtype)));
    }
    return;
  }
  DispatchAll(src_dtype, [&](auto s) {
    using S = decltype(s);
    DispatchAll(dst_dtype, [&](auto d) {
      using D = decltype(d);
      ConvertTyped(static_cast<const S*>(src), static_cast<D*>(dst), n);
    });
  });
}

void FillElements(void* dst, DType dtype, int64_t n, double value) {
  if (n <= 0) return;
  if (value == 0.0 && !std::signbit(value)) {
    // +0 is all zero bits in every dtype. memset, not std::fill's vector
    // stores: for large buffers glibc streams the stores past the caches
    // (no read for ownership): the large MLP's 100 MB zero_grad took
    // 4.3-4.9 ms of CPU instead of 7.1-7.8 (bench/mlp_step_split).
    std::memset(dst, 0, static_cast<size_t>(n * DTypeSize(dtype)));
    return;
  }
  DispatchAll(dtype, [&](auto d) {
    using D = decltype(d);
    const D v = Narrow<D>(value);
    std::fill(static_cast<D*>(dst), static_cast<D*>(dst) + n, v);
  });
}

double ElementAsDouble(const void* src, DType dtype, int64_t i) {
  double out = 0;
  DispatchAll(dtype, [&](auto s) {
    using S = decltype(s);
    out = static_cast<double>(Widen(static_cast<const S*>(src)[i]));
  });
  return out;
}

}  // namespace tandem::internal
