// base/half.h against an independent, branchy reference written from the
// IEEE definitions (integer rounding, no float tricks): every f16 and bf16
// value, every f32 near an f16 rounding boundary, and a stride over all f32.
#include "base/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace tandem::half {
namespace {

uint32_t FloatBits(float f) { return internal::Bits(f); }
float BitsFloat(uint32_t u) { return internal::FromBits(u); }

// Shifts `m` right by `shift` (1..31), rounding to nearest, ties to even.
uint32_t ShiftRightRoundEven(uint32_t m, int shift) {
  const uint32_t kept = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) return kept + 1u;
  return kept;
}

uint16_t RefF16FromF32(float value) {
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
  const uint32_t exp = a >> 23;                       // 102..112
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;  // implicit 1
  const int shift = static_cast<int>(126 - exp);      // 14..24
  return sign | static_cast<uint16_t>(ShiftRightRoundEven(mant, shift));
}

float RefF32FromF16(uint16_t bits) {
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

uint16_t RefBF16FromF32(float value) {
  const uint32_t x = FloatBits(value);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  const uint32_t kept = x >> 16, rest = x & 0xFFFFu;
  if (rest > 0x8000u || (rest == 0x8000u && (kept & 1u))) return kept + 1u;
  return static_cast<uint16_t>(kept);
}

bool IsNan(float f) { return std::isnan(f); }

TEST(HalfTest, EveryF16ToF32MatchesTheReference) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float got = F32FromF16(static_cast<uint16_t>(h));
    const float want = RefF32FromF16(static_cast<uint16_t>(h));
    if (IsNan(want)) {
      // c10 (and we) return a quiet NaN; the reference keeps a signalling
      // payload. Sign and NaN-ness must agree.
      ASSERT_TRUE(IsNan(got)) << h;
      ASSERT_EQ(FloatBits(got) >> 31, FloatBits(want) >> 31) << h;
      continue;
    }
    ASSERT_EQ(FloatBits(got), FloatBits(want)) << "f16 0x" << std::hex << h;
  }
}

TEST(HalfTest, F32ToF16MatchesTheReferenceAtEveryRoundingBoundary) {
  // For every pair of neighbouring f16 values, the f32 values around their
  // midpoint (the tie and 8 ulps either side), both signs.
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const float lo = RefF32FromF16(static_cast<uint16_t>(h));
    const float hi = h + 1 == 0x7C00
                         ? 65536.0f
                         : RefF32FromF16(static_cast<uint16_t>(h + 1));
    const uint32_t mid = FloatBits((lo + hi) / 2);  // exact: one more bit
    for (int d = -8; d <= 8; ++d) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        const float f = BitsFloat((mid + static_cast<uint32_t>(d)) | sign);
        ASSERT_EQ(F16FromF32(f), RefF16FromF32(f))
            << "f32 0x" << std::hex << FloatBits(f);
      }
    }
  }
}

TEST(HalfTest, F32ToF16AndBF16MatchTheReferenceOverAllF32) {
  // A stride that is odd and not a power of two visits every exponent and
  // a spread of mantissas: 2^32 / 977 ~ 4.4 M values.
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 977) {
    const float f = BitsFloat(static_cast<uint32_t>(x));
    ASSERT_EQ(BF16FromF32(f), RefBF16FromF32(f)) << "f32 0x" << std::hex << x;
    ASSERT_EQ(F16FromF32(f), RefF16FromF32(f)) << "f32 0x" << std::hex << x;
  }
}

TEST(HalfTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(F16FromF32(inf), 0x7C00);
  EXPECT_EQ(F16FromF32(-inf), 0xFC00);
  EXPECT_EQ(F16FromF32(nan), 0x7E00);
  EXPECT_EQ(F16FromF32(-nan), 0xFE00);
  EXPECT_EQ(F16FromF32(BitsFloat(0x7F800001u)), 0x7E00);  // signalling NaN
  EXPECT_EQ(BF16FromF32(nan), 0x7FC0);
  EXPECT_EQ(BF16FromF32(-nan), 0x7FC0);  // every NaN, as c10
  EXPECT_EQ(BF16FromF32(BitsFloat(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(BF16FromF32(std::numeric_limits<float>::max()), 0x7F80);  // to inf
  EXPECT_EQ(F16FromF32(65504.0f), 0x7BFF);
  EXPECT_EQ(F16FromF32(65520.0f), 0x7C00);
  EXPECT_EQ(F16FromF32(0.1f), 0x2E66);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    ASSERT_EQ(FloatBits(F32FromBF16(static_cast<uint16_t>(b))), b << 16);
  }
}

// Known encodings (checked against torch.tensor(x).half() / .bfloat16()).
TEST(HalfTest, F16KnownValues) {
  EXPECT_EQ(F16FromF32(0.0f), 0x0000);
  EXPECT_EQ(F16FromF32(-0.0f), 0x8000);
  EXPECT_EQ(F16FromF32(1.0f), 0x3C00);
  EXPECT_EQ(F16FromF32(-2.0f), 0xC000);
  EXPECT_EQ(F16FromF32(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(F16FromF32(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(F16FromF32(-65520.0f), 0xFC00);  // tie -> even -> -inf
  EXPECT_EQ(F16FromF32(1e10f), 0x7C00);
  EXPECT_EQ(F16FromF32(0x1p-14f), 0x0400);  // min normal
  EXPECT_EQ(F16FromF32(0x1p-24f), 0x0001);  // min subnormal
  EXPECT_EQ(F16FromF32(0x1p-25f), 0x0000);  // tie -> even (0)
  EXPECT_EQ(F16FromF32(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(F16FromF32(3 * 0x1p-25f), 0x0002);  // tie 1|2 -> 2
  EXPECT_EQ(F16FromF32(5 * 0x1p-25f), 0x0002);  // tie 2|3 -> 2
  EXPECT_EQ(F16FromF32(-1e-10f), 0x8000);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1.
  EXPECT_EQ(F16FromF32(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(F16FromF32(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Rounding up carries into the exponent: 2 - 2^-12 -> 2.
  EXPECT_EQ(F16FromF32(2.0f - 0x1p-12f), 0x4000);
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(F16FromF32(0x1p-14f - 0x1p-26f), 0x0400);
  EXPECT_EQ(F32FromF16(0x3C00), 1.0f);
  EXPECT_EQ(F32FromF16(0x0001), 0x1p-24f);
  EXPECT_EQ(F32FromF16(0x7BFF), 65504.0f);
  EXPECT_EQ(F32FromF16(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(FloatBits(F32FromF16(0x8000)), 0x80000000u);
  EXPECT_TRUE(IsNan(F32FromF16(0x7C01)));
}

TEST(HalfTest, BF16KnownValues) {
  EXPECT_EQ(BF16FromF32(1.0f), 0x3F80);
  EXPECT_EQ(BF16FromF32(-0.0f), 0x8000);
  EXPECT_EQ(BF16FromF32(1.00390625f), 0x3F80);  // 1 + 2^-8: tie, even
  EXPECT_EQ(BF16FromF32(1.01171875f), 0x3F82);  // 1 + 3*2^-8: tie, even
  EXPECT_EQ(BF16FromF32(std::nextafter(1.00390625f, 2.0f)), 0x3F81);
  EXPECT_EQ(BF16FromF32(1.0f / 3.0f), 0x3EAB);
  EXPECT_EQ(BF16FromF32(-3.140625f), 0xC049);
  EXPECT_EQ(BF16FromF32(BitsFloat(0x7F7F7FFFu)), 0x7F7F);
  EXPECT_EQ(BF16FromF32(BitsFloat(0x7FFFFFFFu)), 0x7FC0);  // NaN, not inf
  // Subnormals round like everything else.
  EXPECT_EQ(BF16FromF32(BitsFloat(0x00018000u)), 0x0002);  // tie 1|2 -> 2
  EXPECT_EQ(BF16FromF32(BitsFloat(0x00008000u)), 0x0000);  // tie 0|1 -> 0
  EXPECT_EQ(F32FromBF16(0x3F80), 1.0f);
}

// Every 16-bit value survives 16 bits -> f32 -> 16 bits (NaNs stay NaN).
TEST(HalfTest, EveryF16AndBF16ValueRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t v = static_cast<uint16_t>(b);
    const float f16 = F32FromF16(v);
    if (IsNan(f16)) {
      ASSERT_EQ(F16FromF32(f16) & 0x7FFFu, 0x7E00u) << b;
    } else {
      ASSERT_EQ(F16FromF32(f16), v) << b;
    }
    const float bf16 = F32FromBF16(v);
    ASSERT_EQ(BF16FromF32(bf16), IsNan(bf16) ? 0x7FC0u : v) << b;
  }
}

#ifdef __FLT16_MAX__
// A second, independent reference: GCC's _Float16 conversion is correctly
// rounded. A sweep of f32 bit patterns (every 4099th: all signs, exponents).
TEST(HalfTest, F16MatchesTheCompilersConversion) {
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4099) {
    const float f = BitsFloat(static_cast<uint32_t>(u));
    if (IsNan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(F16FromF32(f), ref_bits) << "f32 bits " << std::hex << u;
  }
}
#endif

}  // namespace
}  // namespace tandem::half
