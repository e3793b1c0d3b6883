#include "comm/conformance/watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"

namespace tandem::comm::conformance {

Watchdog::Watchdog(absl::Duration limit, std::string what) {
  thread_ = std::thread([this, limit, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(mu_);
    const auto until =
        std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(limit);
    if (cv_.wait_until(lock, until, [this] { return done_; })) return;
    std::fprintf(stderr,
                 "watchdog: %s still running after %s; aborting so the hang "
                 "fails the test\n",
                 what.c_str(), absl::FormatDuration(limit).c_str());
    std::fflush(stderr);
    std::abort();
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

absl::Duration DefaultWatchdogLimit() {
  const char* env = std::getenv("TANDEM_TEST_WATCHDOG_SECONDS");
  int seconds = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &seconds) && seconds > 0) {
    return absl::Seconds(seconds);
  }
  return absl::Seconds(240);
}

}  // namespace tandem::comm::conformance
