#include "tensor/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tandem {
namespace {

float F(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

TEST(HalfTest, ExactValues) {
  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2E66);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);  // max finite
  EXPECT_EQ(FloatToHalfBits(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // tie -> even -> inf
  EXPECT_EQ(FloatToHalfBits(-65520.0f), 0xFC00);
  EXPECT_EQ(FloatToHalfBits(1e10f), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(0x1p-14f), 0x0400);  // min normal
  EXPECT_EQ(FloatToHalfBits(0x1p-24f), 0x0001);  // min subnormal
  EXPECT_EQ(FloatToHalfBits(0x1p-25f), 0x0000);  // tie -> even (0)
  EXPECT_EQ(FloatToHalfBits(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(3 * 0x1p-25f), 0x0002);  // tie 1|2 -> 2
  EXPECT_EQ(FloatToHalfBits(5 * 0x1p-25f), 0x0002);  // tie 2|3 -> 2
  EXPECT_EQ(FloatToHalfBits(1e-10f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-1e-10f), 0x8000);
  // Ties in the normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(FloatToHalfBits(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Rounding up carries into the exponent: 2 - 2^-12 -> 2.
  EXPECT_EQ(FloatToHalfBits(2.0f - 0x1p-12f), 0x4000);
  // Largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(FloatToHalfBits(0x1p-14f - 0x1p-26f), 0x0400);
}

TEST(HalfTest, InfAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToHalfBits(inf), 0x7C00);
  EXPECT_EQ(FloatToHalfBits(-inf), 0xFC00);
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::quiet_NaN()), 0x7E00);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::quiet_NaN()), 0xFE00);
  EXPECT_EQ(FloatToHalfBits(F(0x7F800001u)), 0x7E00);  // signalling NaN
  EXPECT_TRUE(std::isinf(HalfBitsToFloat(0x7C00)));
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(0x7C01)));
  EXPECT_EQ(HalfBitsToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfBitsToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(Bits(HalfBitsToFloat(0x8000)), 0x80000000u);
}

// Every f16 value survives f16 -> float -> f16 (NaNs stay NaN).
TEST(HalfTest, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = HalfBitsToFloat(h);
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (is_nan) {
      ASSERT_TRUE(std::isnan(f)) << b;
      ASSERT_EQ(FloatToHalfBits(f) & 0x7FFF, 0x7E00) << b;
    } else {
      ASSERT_EQ(FloatToHalfBits(f), h) << b;
    }
  }
}

// For every pair of adjacent finite f16 values, the float exactly halfway
// between them rounds to the even one, and the floats just beside the
// midpoint round to the nearer one.
TEST(HalfTest, ExhaustiveMidpointsRoundToEven) {
  for (uint16_t lo = 0; lo < 0x7C00; ++lo) {
    const uint16_t hi = lo + 1;
    const float a = HalfBitsToFloat(lo);
    // The value past max finite is 65536 (it rounds to inf).
    const float b = hi == 0x7C00 ? 65536.0f : HalfBitsToFloat(hi);
    const float mid = a + (b - a) / 2;  // exact: needs one more bit
    const uint16_t even = (lo & 1) ? hi : lo;
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(FloatToHalfBits(s * mid), sign | even) << lo;
      ASSERT_EQ(FloatToHalfBits(s * std::nextafter(mid, 0.0f)), sign | lo)
          << lo;
      ASSERT_EQ(FloatToHalfBits(s * std::nextafter(mid, 1e9f)), sign | hi)
          << lo;
    }
  }
}

// Independent reference: the nearest f16 by distance, ties to even.
uint16_t ReferenceHalf(float x) {
  static const std::vector<double>* table = [] {
    auto* t = new std::vector<double>;
    for (uint16_t b = 0; b < 0x7C00; ++b) t->push_back(HalfBitsToFloat(b));
    t->push_back(65536.0);  // stands for inf
    return t;
  }();
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65536.0) return sign | 0x7C00;
  auto it = std::lower_bound(table->begin(), table->end(), a);
  uint16_t hi = static_cast<uint16_t>(it - table->begin());
  if ((*table)[hi] == a) return sign | hi;
  const uint16_t lo = hi - 1;
  const double dlo = a - (*table)[lo], dhi = (*table)[hi] - a;
  if (dlo < dhi) return sign | lo;
  if (dhi < dlo) return sign | hi;
  return sign | ((lo & 1) ? hi : lo);
}

TEST(HalfTest, MatchesNearestNeighbourReferenceOnRandomFloats) {
  std::mt19937 rng(42);
  // Exponents spread over f16's range and beyond.
  std::uniform_int_distribution<uint32_t> mant(0, 0x7FFFFF);
  std::uniform_int_distribution<uint32_t> exp(127 - 30, 127 + 17);
  std::uniform_int_distribution<uint32_t> sign(0, 1);
  for (int i = 0; i < 200000; ++i) {
    const float x = F((sign(rng) << 31) | (exp(rng) << 23) | mant(rng));
    ASSERT_EQ(FloatToHalfBits(x), ReferenceHalf(x)) << x;
  }
}

TEST(HalfTest, StructWrapper) {
  Half h(1.0f / 3.0f);
  EXPECT_EQ(h.bits, 0x3555);
  EXPECT_EQ(static_cast<float>(h), 0.333251953125f);
  EXPECT_EQ(Half::FromBits(0x3C00).bits, 0x3C00);
}

TEST(BFloat16Test, ExactValues) {
  EXPECT_EQ(FloatToBFloat16Bits(0.0f), 0x0000);
  EXPECT_EQ(FloatToBFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16Bits(1.00390625f), 0x3F80);  // 1 + 2^-8: tie, even
  EXPECT_EQ(FloatToBFloat16Bits(1.01171875f), 0x3F82);  // 1 + 3*2^-8: tie
  EXPECT_EQ(FloatToBFloat16Bits(std::nextafter(1.00390625f, 2.0f)), 0x3F81);
  EXPECT_EQ(FloatToBFloat16Bits(1.0f / 3.0f), 0x3EAB);
  EXPECT_EQ(FloatToBFloat16Bits(-3.140625f), 0xC049);
  // Largest float rounds past the largest bf16 into inf.
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(FloatToBFloat16Bits(F(0x7F7F7FFFu)), 0x7F7F);
  // Subnormals round like everything else.
  EXPECT_EQ(FloatToBFloat16Bits(F(0x00018000u)), 0x0002);  // tie 1|2 -> 2
  EXPECT_EQ(FloatToBFloat16Bits(F(0x00008000u)), 0x0000);  // tie 0|1 -> 0
}

TEST(BFloat16Test, InfAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBFloat16Bits(inf), 0x7F80);
  EXPECT_EQ(FloatToBFloat16Bits(-inf), 0xFF80);
  // c10 maps every NaN, whatever its sign or payload, to 0x7FC0.
  EXPECT_EQ(FloatToBFloat16Bits(std::numeric_limits<float>::quiet_NaN()),
            0x7FC0);
  EXPECT_EQ(FloatToBFloat16Bits(-std::numeric_limits<float>::quiet_NaN()),
            0x7FC0);
  // A NaN whose payload sits in the low bits must not round to inf.
  EXPECT_EQ(FloatToBFloat16Bits(F(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(FloatToBFloat16Bits(F(0x7FFFFFFFu)), 0x7FC0);
}

TEST(BFloat16Test, ExhaustiveRoundTripAndMidpoints) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = BFloat16BitsToFloat(h);
    ASSERT_EQ(Bits(f), b << 16);
    if (std::isnan(f)) {
      ASSERT_EQ(FloatToBFloat16Bits(f), 0x7FC0);
      continue;
    }
    ASSERT_EQ(FloatToBFloat16Bits(f), h) << b;
    if ((h & 0x7FFF) >= 0x7F80) continue;  // inf: no upper neighbour
    // Halfway to the next bf16 (away from zero) and its two neighbours.
    const uint32_t mid = (b << 16) | 0x8000u;
    const uint16_t up = h + 1;
    ASSERT_EQ(FloatToBFloat16Bits(F(mid)), (h & 1) ? up : h) << b;
    ASSERT_EQ(FloatToBFloat16Bits(F(mid - 1)), h) << b;
    ASSERT_EQ(FloatToBFloat16Bits(F(mid + 1)), up) << b;
  }
}

TEST(BFloat16Test, MatchesNearestNeighbourReferenceOnRandomFloats) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float x = F(rng());
    if (std::isnan(x)) continue;
    const uint32_t bits = Bits(x);
    const uint16_t lo = static_cast<uint16_t>(bits >> 16);  // toward zero
    const uint16_t hi = lo + 1;                             // away from zero
    const double dx = std::fabs(static_cast<double>(x));
    const double dlo = dx - std::fabs(double{BFloat16BitsToFloat(lo)});
    // The value after the largest finite bf16 is 2^128 (-> inf).
    const double hi_val = (hi & 0x7FFF) == 0x7F80
                              ? std::ldexp(1.0, 128)
                              : std::fabs(double{BFloat16BitsToFloat(hi)});
    const double dhi = hi_val - dx;
    const uint16_t want = dlo < dhi   ? lo
                          : dhi < dlo ? hi
                                      : ((lo & 1) ? hi : lo);
    ASSERT_EQ(FloatToBFloat16Bits(x), want) << x;
  }
}

}  // namespace
}  // namespace tandem
