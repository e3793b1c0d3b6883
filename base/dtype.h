// The one element-type vocabulary of tandem: a Tensor's dtype and the dtype
// of a buffer a collective moves are the same enum, with one numbering and
// one name table, so a tensor hands its dtype to comm without a cast.
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
// The numbering is part of the contract: tensor metadata and collective
// fingerprints carry static_cast<int>(dtype), and every member keeps its
// value (base/dtype_test.cc pins them). u8 is a communication dtype (bytes a
// collective moves); tensors are not created with it.
//
// Pure functions; thread-safe.
#ifndef TANDEM_BASE_DTYPE_H_
#define TANDEM_BASE_DTYPE_H_

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
  kU8 = 6,
};

// Every member, in numbering order.
inline constexpr DType kEveryDType[] = {DType::kF32,  DType::kF64, DType::kF16,
                                        DType::kBF16, DType::kI64, DType::kI32,
                                        DType::kU8};

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

// Bytes per element: 4, 8, 2, 2, 8, 4, 1; 0 for a value outside the enum.
int64_t DTypeSize(DType dtype);
// "f32", "f64", "f16", "bf16", "i64", "i32", "u8"; "dtype(<n>)" for a value
// outside the enum. A static string (const char* because Debian's Abseil
// StrCat does not take std::string_view); compare it with EXPECT_STREQ.
const char* DTypeName(DType dtype);
// True for the members of the enum.
bool IsValidDType(DType dtype);
// True for f32, f64, f16, bf16 (the dtypes that may require gradients).
bool IsFloatingPoint(DType dtype);

// True for the 16-bit floats f16 and bf16 (stored as uint16_t encodings).
bool Is16BitFloat(DType dtype);
// Converts `count` f16 or bf16 elements (by `dtype`; anything else is a
// programming error and converts nothing) at `src` to f32 at `dst`, exactly,
// with base/half.h's codec: the one bulk widening loop engines use to
// reduce 16-bit floats in f32.
void Widen16BitFloats(DType dtype, const void* src, float* dst, int64_t count);
// The reverse: rounds `count` f32 values to f16 or bf16 (nearest, ties to
// even), as base/half.h does.
void Narrow16BitFloats(DType dtype, const float* src, void* dst, int64_t count);

// Maps a C++ element type to its DType: float, double, Half, BFloat16,
// int64_t, int32_t, uint8_t. Other types do not compile.
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
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kU8;
};

}  // namespace tandem

#endif  // TANDEM_BASE_DTYPE_H_
