// Element types of a tandem Tensor.
//
//   DType t = DType::kF32;
//   DTypeSize(t);             // 4
//   DTypeName(t);             // "f32"
//   IsFloatingPoint(t);       // true
//   DTypeOf<double>::value;   // DType::kF64
//
// f16 and bf16 elements are stored as tandem::Half / tandem::BFloat16, two
// bytes holding the encoding; their conversions to and from float are
// base/half.h's (bit-exact with PyTorch's c10::Half / c10::BFloat16):
//
//   tandem::Half h(1.0f / 3.0f);         // h.bits == 0x3555
//   float back = static_cast<float>(h);  // 0.333251953125f
//
// Pure functions; thread-safe.
#ifndef TANDEM_TENSOR_DTYPE_H_
#define TANDEM_TENSOR_DTYPE_H_

#include <cstdint>

#include "base/half.h"

namespace tandem {

enum class DType : int8_t {
  kF32 = 0,
  kF64 = 1,
  kF16 = 2,
  kBF16 = 3,
  kI64 = 4,
  kI32 = 5,
};

// IEEE 754 binary16. Two bytes, trivially copyable; `bits` is the encoding.
// Arithmetic is never done in 16 bits: kernels convert to float, compute,
// and convert back (half::F16FromF32 rounds to nearest even).
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float value) : bits(half::F16FromF32(value)) {}
  static Half FromBits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return half::F32FromF16(bits); }
};

// bfloat16: the top 16 bits of a float32. Two bytes, trivially copyable.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(half::BF16FromF32(value)) {}
  static BFloat16 FromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return half::F32FromBF16(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

// Bytes per element: 4, 8, 2, 2, 8, 4.
int64_t DTypeSize(DType dtype);
// "f32", "f64", "f16", "bf16", "i64", "i32" (a static string; const char*
// because Debian's Abseil StrCat does not take std::string_view).
const char* DTypeName(DType dtype);
// True for f32, f64, f16, bf16 (the dtypes that may require gradients).
bool IsFloatingPoint(DType dtype);

// Maps a C++ element type to its DType: float, double, Half, BFloat16,
// int64_t, int32_t. Other types do not compile.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<Half> {
  static constexpr DType value = DType::kF16;
};
template <>
struct DTypeOf<BFloat16> {
  static constexpr DType value = DType::kBF16;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_DTYPE_H_
