// Helpers for sim's own tests: a latch for ordering ranks deterministically
// (std::mutex based, so ThreadSanitizer sees it), a nap, a fixture that puts
// every test under a watchdog, and one that runs a test under both ways of
// running ranks (OS threads and fibers).
//
// On a fiber, Latch::Wait and Nap never block the worker thread (other
// ranks pinned to it must keep running): they park the fiber for a
// millisecond at a time until done.
#ifndef TANDEM_SIM_TEST_UTIL_H_
#define TANDEM_SIM_TEST_UTIL_H_

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/conformance/watchdog.h"
#include "gtest/gtest.h"
#include "sim/fiber.h"
#include "sim/sim.h"

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
    if (internal::CurrentFiber() != nullptr) {
      for (;;) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (count_ <= 0) return;
        }
        internal::ParkCurrentFiber(std::chrono::steady_clock::now() +
                                   std::chrono::milliseconds(1));
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return count_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

// Sleeps `d` (a rank that is busy elsewhere), without blocking a fiber's
// worker.
inline void Nap(absl::Duration d) {
  if (internal::CurrentFiber() == nullptr) {
    absl::SleepFor(d);
    return;
  }
  const auto until =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(d);
  while (std::chrono::steady_clock::now() < until) {
    internal::ParkCurrentFiber(until);
  }
}

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

// A test that runs under both RankExecution modes (instantiate it with
// TANDEM_SIM_TEST_BOTH_MODES): RunRanks is sim::Run with the mode set.
class ModeTest : public WatchdogTest,
                 public ::testing::WithParamInterface<RankExecution> {
 protected:
  RankExecution mode() const { return GetParam(); }
  bool fibers() const { return GetParam() == RankExecution::kFibers; }
  RunResult RunRanks(int world_size, const RankFn& fn,
                     Options options = Options()) const {
    options.ranks = GetParam();
    return sim::Run(world_size, fn, options);
  }
};

inline std::string ModeName(const ::testing::TestParamInfo<RankExecution>& i) {
  return i.param == RankExecution::kFibers ? "Fibers" : "Threads";
}

#define TANDEM_SIM_TEST_BOTH_MODES(suite)                       \
  INSTANTIATE_TEST_SUITE_P(                                     \
      Modes, suite,                                             \
      ::testing::Values(::tandem::sim::RankExecution::kThreads, \
                        ::tandem::sim::RankExecution::kFibers), \
      ::tandem::sim::testing::ModeName)

}  // namespace tandem::sim::testing

#endif  // TANDEM_SIM_TEST_UTIL_H_
