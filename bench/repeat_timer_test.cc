#include "bench/repeat_timer.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

// About 50 ms of operations per warm-up batch, at least one, at most
// 100,000, and a probe of zero or nan never divides by zero.
TEST(WarmUpBatchTest, FiftyMillisecondsClamped) {
  EXPECT_EQ(WarmUpBatch(1e-3), 50);
  EXPECT_EQ(WarmUpBatch(1e-6), 50000);
  EXPECT_EQ(WarmUpBatch(1.0), 1);
  EXPECT_EQ(WarmUpBatch(0.0), 100000);
  EXPECT_EQ(WarmUpBatch(1e-12), 100000);
  EXPECT_EQ(WarmUpBatch(std::nan("")), 100000);
}

}  // namespace
}  // namespace tandem::bench
