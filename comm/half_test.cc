#include "comm/half.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(F16Test, KnownValues) {
  EXPECT_EQ(F16FromF32(0.0f), 0x0000);
  EXPECT_EQ(F16FromF32(-0.0f), 0x8000);
  EXPECT_EQ(F16FromF32(1.0f), 0x3C00);
  EXPECT_EQ(F16FromF32(-2.0f), 0xC000);
  EXPECT_EQ(F16FromF32(65504.0f), 0x7BFF);  // largest finite
  EXPECT_EQ(F16FromF32(65520.0f), 0x7C00);  // rounds to inf
  EXPECT_EQ(F16FromF32(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(F16FromF32(0x1.0p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F16FromF32(0x1.0p-25f), 0x0000);  // tie -> even (0)
  EXPECT_EQ(F16FromF32(0x1.8p-24f), 0x0002);  // tie -> even (2)
  EXPECT_EQ(F16FromF32(0.1f), 0x2E66);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even gives 1.
  EXPECT_EQ(F16FromF32(1.0f + 0x1.0p-11f), 0x3C00);
  // 1 + 3 * 2^-11 is halfway between odd and even mantissas: rounds up.
  EXPECT_EQ(F16FromF32(1.0f + 3 * 0x1.0p-11f), 0x3C02);
  EXPECT_TRUE(std::isnan(F32FromF16(F16FromF32(std::nanf("")))));
  EXPECT_EQ(F32FromF16(0x3C00), 1.0f);
  EXPECT_EQ(F32FromF16(0x0001), 0x1.0p-24f);
  EXPECT_EQ(F32FromF16(0xFC00), -std::numeric_limits<float>::infinity());
}

TEST(F16Test, EveryValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F32FromF16(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7C00u, 0x7C00u);
      EXPECT_NE(h & 0x03FFu, 0u);
      continue;
    }
    ASSERT_EQ(F16FromF32(f), h) << "h = " << h;
  }
}

#ifdef __FLT16_MAX__
// GCC's _Float16 conversion is correctly rounded: use it as the reference on
// a sweep of f32 bit patterns (every 4099th, all signs and exponents).
TEST(F16Test, MatchesCompilerConversion) {
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 4099) {
    const float f = FromBits(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    ASSERT_EQ(F16FromF32(f), ref_bits) << "f32 bits " << std::hex << u;
  }
}
#endif

TEST(BF16Test, KnownValues) {
  EXPECT_EQ(BF16FromF32(1.0f), 0x3F80);
  EXPECT_EQ(BF16FromF32(-0.0f), 0x8000);
  EXPECT_EQ(F32FromBF16(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(BF16FromF32(1.0f + 0x1.0p-8f), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: rounds to even.
  EXPECT_EQ(BF16FromF32(1.0f + 3 * 0x1.0p-8f), 0x3F82);
  EXPECT_EQ(BF16FromF32(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3F81);
  // The largest finite f32 rounds up to infinity.
  EXPECT_EQ(BF16FromF32(std::numeric_limits<float>::max()), 0x7F80);
  const uint16_t nan = BF16FromF32(FromBits(0x7F800001u));  // signalling NaN
  EXPECT_TRUE(std::isnan(F32FromBF16(nan)));
  EXPECT_EQ(BF16FromF32(FromBits(0xFFC00000u)), 0x7FC0);  // every NaN, as c10
}

TEST(BF16Test, EveryValueRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = F32FromBF16(static_cast<uint16_t>(b));
    ASSERT_EQ(Bits(f), b << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(BF16FromF32(f), b) << "b = " << b;
  }
}

}  // namespace
}  // namespace tandem::comm
