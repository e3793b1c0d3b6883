#include "comm/conformance/patterns.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "base/half.h"
#include "comm/types.h"
#include "gtest/gtest.h"

namespace tandem::comm::conformance {
namespace {

TEST(PatternsTest, ValuesStayInTheirExactRanges) {
  for (DType dt : kEveryDType) {
    for (int r = 0; r < 8; ++r) {
      for (int64_t i = 0; i < 100; ++i) {
        const int64_t s = PatternValue(Pattern::kSum, dt, r, 1, i);
        const int64_t m = PatternValue(Pattern::kMinMax, dt, r, 1, i);
        const int64_t p = PatternValue(Pattern::kProd, dt, r, 1, i);
        if (dt == DType::kU8) {
          EXPECT_GE(s, 0);
          EXPECT_LE(s, 8);
          EXPECT_GE(m, 0);
          EXPECT_LE(m, 16);
          EXPECT_GE(p, 1);
          EXPECT_LE(p, 3);
        } else {
          EXPECT_LE(s < 0 ? -s : s, 4);
          EXPECT_LE(m < 0 ? -m : m, 8);
          EXPECT_TRUE(p == 1 || p == -1 || p == 2 || p == -2);
        }
      }
    }
  }
}

TEST(PatternsTest, ReferenceSumAndAvg) {
  // Two ranks, element 0: values (0*7 + 0*13 + 0) % 9 - 4 = -4 and
  // (0 + 13) % 9 - 4 = 0: sum -4, avg -2.
  std::vector<uint8_t> sum =
      ReferenceReduce(Pattern::kSum, DType::kF32, ReduceOp::kSum, 2, 0, 1);
  std::vector<uint8_t> avg =
      ReferenceReduce(Pattern::kSum, DType::kF16, ReduceOp::kAvg, 2, 0, 1);
  float f;
  std::memcpy(&f, sum.data(), 4);
  EXPECT_EQ(f, -4.0f);
  uint16_t h;
  std::memcpy(&h, avg.data(), 2);
  EXPECT_EQ(half::F32FromF16(h), -2.0f);
}

TEST(PatternsTest, CompareNamesTheFirstDifference) {
  std::vector<int32_t> want = {1, 2, 3, 4}, got = {1, 2, 7, 9};
  absl::Status s = CompareBuffers("x", DType::kI32, got.data(), want.data(), 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(
      absl::StrContains(s.message(),
                        "x: 2 of 4 i32 elements differ; first at index 2: "
                        "expected 3, found 7"))
      << s;
  EXPECT_TRUE(
      CompareBuffers("x", DType::kI32, want.data(), want.data(), 4).ok());
  std::vector<float> a = {1.5f}, b = {2.0f};
  EXPECT_TRUE(absl::StrContains(
      CompareBuffers("y", DType::kF32, b.data(), a.data(), 1).message(),
      "expected 1.5 (0x3fc00000), found 2 (0x40000000)"));
}

}  // namespace
}  // namespace tandem::comm::conformance
