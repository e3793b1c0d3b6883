#include "tensor/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace tandem::cpu {
namespace {

uint16_t B(float v) {  // exact for the small integers used here
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);
}
float F(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(GemmBf16Test, ProductsBiasTransposesAndAccumulate) {
  // A [2,3], B [3,2]; small integers: every product and sum is exact.
  const std::vector<uint16_t> a = {B(1), B(2), B(3), B(4), B(5), B(6)};
  const std::vector<uint16_t> b = {B(1), B(-1), B(2), B(0), B(-2), B(1)};
  const std::vector<uint16_t> bias = {B(10), B(20)};
  std::vector<uint16_t> c(4);
  ASSERT_TRUE(GemmBf16({.m = 2, .n = 2, .k = 3}, a.data(), b.data(),
                       bias.data(), c.data())
                  .ok());
  EXPECT_EQ(F(c[0]), 10 + (1 + 4 - 6));
  EXPECT_EQ(F(c[1]), 20 + (-1 + 0 + 3));
  EXPECT_EQ(F(c[2]), 10 + (4 + 10 - 12));
  EXPECT_EQ(F(c[3]), 20 + (-4 + 0 + 6));
  // C += A^T-stored A: A^T is [3,2] read as op(A) with A stored [2,3]^T.
  const std::vector<uint16_t> at = {B(1), B(4), B(2), B(5), B(3), B(6)};
  ASSERT_TRUE(
      GemmBf16(
          {.transpose_a = true, .m = 2, .n = 2, .k = 3, .accumulate = true},
          at.data(), b.data(), nullptr, c.data())
          .ok());
  EXPECT_EQ(F(c[0]), 10 + 2 * (1 + 4 - 6));
  EXPECT_EQ(F(c[3]), 20 + 2 * (-4 + 0 + 6));
}

TEST(GemmBf16Test, RoundsOnceToNearestEven) {
  // 1 + 2^-8 + 2^-9 is not a bf16; the sum of three exact products rounds
  // once to 1 + 2^-7 (nearest), never through intermediate bf16 values.
  const std::vector<uint16_t> a = {B(1), B(1.0f / 256), B(1.0f / 512)};
  const std::vector<uint16_t> b = {B(1), B(1), B(1)};
  uint16_t c = 0;
  ASSERT_TRUE(
      GemmBf16({.m = 1, .n = 1, .k = 3}, a.data(), b.data(), nullptr, &c).ok());
  EXPECT_EQ(F(c), 1.0f + 1.0f / 128);
}

TEST(GemmBf16Test, EmptyAndBadDims) {
  std::vector<uint16_t> c = {B(7)};
  const uint16_t bias = B(3);
  ASSERT_TRUE(
      GemmBf16({.m = 1, .n = 1, .k = 0}, nullptr, nullptr, &bias, c.data())
          .ok());
  EXPECT_EQ(F(c[0]), 3);
  EXPECT_EQ(
      GemmBf16({.m = -1, .n = 1, .k = 1}, nullptr, nullptr, nullptr, c.data())
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::cpu
