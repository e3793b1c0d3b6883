#include "tensor/half.h"

#include <cstdint>
#include <cstring>

namespace tandem {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Shifts `m` right by `shift` (1..31), rounding to nearest, ties to even.
uint32_t ShiftRightRoundEven(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) return kept + 1u;
  return kept;
}

}  // namespace

uint16_t FloatToHalfBits(float value) {
  const uint32_t x = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) {  // inf or NaN
    return sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u);
  }
  // 65520 = 0x477FF000 is halfway between 65504 (max f16) and 65536; the
  // tie goes to the even neighbour, 65536, which is inf.
  if (a >= 0x477FF000u) return sign | 0x7C00u;
  if (a >= 0x38800000u) {  // >= 2^-14: a normal f16 (or rounds up into one)
    const uint32_t exp = (a >> 23) - 127 + 15;
    const uint32_t mant = a & 0x7FFFFFu;
    // Rounding carries into the exponent naturally (0x3FF + 1 -> next exp).
    const uint32_t r = ShiftRightRoundEven((exp << 23) | mant, 13);
    return sign | static_cast<uint16_t>(r);
  }
  // Subnormal f16: value = m * 2^-24 with m in [0, 1024].
  // 2^-25 (0x33000000) is the tie between 0 and 2^-24; it goes to 0.
  if (a <= 0x33000000u) return sign;
  const uint32_t exp = a >> 23;                      // 102..112
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;  // implicit 1
  const int shift = static_cast<int>(126 - exp);      // 14..24
  return sign | static_cast<uint16_t>(ShiftRightRoundEven(mant, shift));
}

float HalfBitsToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1Fu;
  const uint32_t mant = bits & 0x3FFu;
  if (exp == 0x1Fu) {  // inf / NaN (payload kept)
    return BitsFloat(sign | 0x7F800000u | (mant << 13));
  }
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return BitsFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t FloatToBFloat16Bits(float value) {
  const uint32_t x = FloatBits(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;  // NaN, as c10 does
  // Round to nearest even on the low 16 bits; overflow carries into inf.
  const uint32_t bias = 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + bias) >> 16);
}

float BFloat16BitsToFloat(uint16_t bits) {
  return BitsFloat(static_cast<uint32_t>(bits) << 16);
}

}  // namespace tandem
