#include "comm/conformance/watchdog.h"

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem::comm::conformance {
namespace {

TEST(WatchdogTest, QuietWhenTheWorkFinishes) {
  Watchdog watchdog(absl::Seconds(30), "quick");
  SUCCEED();
}

TEST(WatchdogDeathTest, AbortsWithTheNameOfAHang) {
  EXPECT_DEATH(
      {
        Watchdog watchdog(absl::Milliseconds(10), "HangingTest.Body");
        absl::SleepFor(absl::Seconds(30));
      },
      "watchdog: HangingTest.Body still running after 10ms");
}

}  // namespace
}  // namespace tandem::comm::conformance
