// Helpers for sim's own tests: a latch for ordering ranks deterministically
// (std::mutex based, so ThreadSanitizer sees it) and a fixture that puts
// every test under a watchdog.
#ifndef TANDEM_SIM_TEST_UTIL_H_
#define TANDEM_SIM_TEST_UTIL_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/conformance/watchdog.h"
#include "gtest/gtest.h"

namespace tandem::sim::testing {

// Count down to zero once; Wait() blocks until then.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ <= 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return count_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

// Every test body runs under a 60 s watchdog: a hang aborts with the test's
// name instead of stalling CI.
class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    watchdog_ = std::make_unique<comm::conformance::Watchdog>(
        comm::conformance::DefaultWatchdogLimit() / 4,
        absl::StrCat(info->test_suite_name(), ".", info->name()));
  }
  void TearDown() override { watchdog_.reset(); }

 private:
  std::unique_ptr<comm::conformance::Watchdog> watchdog_;
};

}  // namespace tandem::sim::testing

#endif  // TANDEM_SIM_TEST_UTIL_H_
