// 16-bit floating-point storage types and their conversions to and from float.
//
// tandem stores f16 (IEEE 754 binary16) and bf16 (bfloat16) tensors as these
// two-byte structs. Arithmetic is never done in 16 bits: kernels convert to
// float, compute, and convert back. The conversions are bit-exact with
// PyTorch's c10::Half / c10::BFloat16:
//   - float -> f16 and float -> bf16 round to nearest, ties to even;
//   - values too large for f16 (|x| >= 65520) become +-inf; inf stays inf;
//   - NaN becomes a quiet NaN: f16 keeps the sign (0x7E00 / 0xFE00), bf16
//     is always 0x7FC0 (as c10 does);
//   - f16 and bf16 -> float are exact (every 16-bit value is a float; an
//     f16 NaN comes back as a quiet NaN of the same sign, as in c10).
// The implementation is base/half.h, shared with comm.
// A double is converted by rounding it to float first (as c10 does), so
// double -> f16 can round twice; tandem reproduces PyTorch rather than
// rounding once.
//
//   tandem::Half h(1.0f / 3.0f);           // 0x3555
//   float back = static_cast<float>(h);    // 0.333251953125f
//   uint16_t bits = tandem::FloatToBFloat16Bits(1.00390625f);  // tie -> 0x3F80
//
// Everything here is a pure function; thread-safe.
#ifndef TANDEM_TENSOR_HALF_H_
#define TANDEM_TENSOR_HALF_H_

#include <cstdint>

namespace tandem {

uint16_t FloatToHalfBits(float value);
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToBFloat16Bits(float value);
float BFloat16BitsToFloat(uint16_t bits);

// IEEE 754 binary16. Two bytes, trivially copyable; `bits` is the encoding.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float value) : bits(FloatToHalfBits(value)) {}
  static Half FromBits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return HalfBitsToFloat(bits); }
};

// bfloat16: the top 16 bits of a float32. Two bytes, trivially copyable.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float value) : bits(FloatToBFloat16Bits(value)) {}
  static BFloat16 FromBits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  explicit operator float() const { return BFloat16BitsToFloat(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace tandem

#endif  // TANDEM_TENSOR_HALF_H_
