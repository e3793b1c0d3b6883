#include "sim/futex.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#endif

namespace tandem::sim::internal {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the futex word must be a plain 32-bit integer");

#if defined(__linux__)

namespace {

// steady_clock is CLOCK_MONOTONIC on Linux: the clock FUTEX_WAIT_BITSET
// measures absolute deadlines against.
timespec ToMonotonic(EventWord::Deadline deadline) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      deadline.time_since_epoch())
                      .count();
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  return ts;
}

uint32_t* Address(std::atomic<uint32_t>& word) {
  return reinterpret_cast<uint32_t*>(&word);
}

}  // namespace

void EventWord::Sleep(uint32_t seen, Deadline deadline) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // Re-read after announcing ourselves: a Signal() that bumped the
  // generation before it saw us as a sleeper is caught here.
  if (gen_.load(std::memory_order_seq_cst) == seen) {
    // An hour at most per call (callers loop): keeps the arithmetic away
    // from the clock's end and every wait bounded.
    const Deadline cap =
        std::chrono::steady_clock::now() + std::chrono::hours(1);
    const timespec ts = ToMonotonic(std::min(deadline, cap));
    // EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "re-check".
    syscall(SYS_futex, Address(gen_), FUTEX_WAIT_BITSET_PRIVATE, seen, &ts,
            nullptr, FUTEX_BITSET_MATCH_ANY);
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void EventWord::Signal(int n) {
  gen_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  syscall(SYS_futex, Address(gen_), FUTEX_WAKE_PRIVATE, std::max(1, n), nullptr,
          nullptr, 0);
}

#else  // !__linux__

// Without futexes: a short timed nap (correct, slower to wake).
void EventWord::Sleep(uint32_t seen, Deadline deadline) {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (gen_.load(std::memory_order_seq_cst) == seen) {
    std::this_thread::sleep_until(std::min(
        deadline,
        std::chrono::steady_clock::now() + std::chrono::microseconds(50)));
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void EventWord::Signal(int) { gen_.fetch_add(1, std::memory_order_seq_cst); }

#endif

}  // namespace tandem::sim::internal
