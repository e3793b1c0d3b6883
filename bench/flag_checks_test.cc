#include "bench/flag_checks.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FlagChecksTest, SecondsMustBeFinitePositiveAndBounded) {
  EXPECT_TRUE(CheckSeconds("--t", 0.5).ok());
  EXPECT_TRUE(CheckSeconds("--t", 3600).ok());
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL, 1e308}) {
    absl::Status s = CheckSeconds("--t", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--t must be a number of seconds"));
  }
}

TEST(FlagChecksTest, WarmUpIsZeroOrBoundedSeconds) {
  EXPECT_TRUE(CheckWarmUpSeconds(0).ok());
  EXPECT_TRUE(CheckWarmUpSeconds(1).ok());
  EXPECT_TRUE(CheckWarmUpSeconds(60).ok());
  for (double bad : {-1.0, 60.5, std::nan(""), HUGE_VAL, 1e308}) {
    absl::Status s = CheckWarmUpSeconds(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--warmup_seconds must be 0"));
  }
}

TEST(FlagChecksTest, IntRange) {
  EXPECT_TRUE(CheckInt("--n", 3, 1, 3).ok());
  EXPECT_THAT(CheckInt("--n", 0, 1, 3).message(),
              HasSubstr("--n must be in [1, 3], got 0"));
}

TEST(FlagChecksTest, ByteRangeOrderAndMemory) {
  EXPECT_TRUE(CheckByteRange(8, 1024, 4).ok());
  EXPECT_THAT(CheckByteRange(1024, 8, 4).message(),
              HasSubstr("need 1 <= --min_bytes <= --max_bytes, got "
                        "--min_bytes=1024 --max_bytes=8"));
  EXPECT_FALSE(CheckByteRange(0, 8, 4).ok());
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(CheckByteRange(8, max, 4).message(),
              HasSubstr("overflows a 64-bit size"));
  EXPECT_THAT(CheckByteRange(8, max / 8, 4).message(),
              HasSubstr("physical memory"));
}

TEST(FlagChecksTest, GeometricSizesStopWithoutOverflow) {
  EXPECT_THAT(GeometricSizes(4, 64, 4), ElementsAre(4, 16, 64));
  EXPECT_THAT(GeometricSizes(5, 64, 4), ElementsAre(5, 20));
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(GeometricSizes(8, max, max), ElementsAre(8));
  EXPECT_EQ(GeometricSizes(1, max, 2).size(), 63u);
}

TEST(FlagChecksTest, GoogleBenchmarkFlags) {
  const char* good[] = {"bin", "--benchmark_min_time=0.5",
                        "--benchmark_min_time=2s", "--benchmark_repetitions=3",
                        "--benchmark_filter=x"};
  EXPECT_TRUE(CheckGoogleBenchmarkFlags(5, good).ok());
  for (const char* bad :
       {"--benchmark_min_time=inf", "--benchmark_min_time=nan",
        "--benchmark_min_time=-1", "--benchmark_min_warmup_time=1e308",
        "--benchmark_repetitions=-1", "--benchmark_repetitions=0",
        "--benchmark_repetitions=nan"}) {
    const char* argv[] = {"bin", bad};
    absl::Status s = CheckGoogleBenchmarkFlags(2, argv);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--benchmark_")) << bad;
  }
  // argv[0] is never a flag.
  const char* program[] = {"--benchmark_repetitions=-1"};
  EXPECT_TRUE(CheckGoogleBenchmarkFlags(1, program).ok());
}

}  // namespace
}  // namespace tandem::bench
