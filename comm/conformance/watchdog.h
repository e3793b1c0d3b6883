// Watchdog: turns a hang in a test into a failure with a message.
//
//   TEST(Foo, Bar) {
//     comm::conformance::Watchdog watchdog(absl::Seconds(60), "Foo.Bar");
//     ...   // if this takes longer than 60 s, the process aborts with
//           // "watchdog: Foo.Bar still running after 1m; aborting"
//   }
//
// For tests only: on expiry it prints to stderr and calls std::abort(), so CI
// reports a crash of the named test instead of stalling until Bazel's own
// timeout. Construction starts one thread; destruction stops and joins it.
#ifndef TANDEM_COMM_CONFORMANCE_WATCHDOG_H_
#define TANDEM_COMM_CONFORMANCE_WATCHDOG_H_

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"

namespace tandem::comm::conformance {

class Watchdog {
 public:
  Watchdog(absl::Duration limit, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The limit every conformance test runs under: TANDEM_TEST_WATCHDOG_SECONDS
// if set, else 240 s (below Bazel's "moderate" test timeout of 300 s).
absl::Duration DefaultWatchdogLimit();

}  // namespace tandem::comm::conformance

#endif  // TANDEM_COMM_CONFORMANCE_WATCHDOG_H_
