#include "sim/futex.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

#include "sim/fiber.h"

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

void EventWord::SleepFiber(void* fiber, uint32_t seen, Deadline deadline) {
  FiberWaiter me;
  me.fiber = fiber;
  {
    std::lock_guard<std::mutex> lock(fiber_mu_);
    // Announce, then check: a Signal either bumped the generation before
    // (seen here) or finds fiber_sleepers_ > 0 and takes this lock after us.
    fiber_sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (gen_.load(std::memory_order_seq_cst) != seen) {
      fiber_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      return;
    }
    me.index = fiber_waiters_.size();
    fiber_waiters_.push_back({&me, fiber});
    me.linked.store(true, std::memory_order_relaxed);
  }
  // No deadline: an hour at most per park, as for threads (callers loop).
  // A finite deadline needs no clock read here.
  ParkCurrentFiber(deadline != Deadline::max()
                       ? deadline
                       : std::chrono::steady_clock::now() +
                             std::chrono::hours(1));
  // Usually a Signal unlinked us: no lock (8192 waking fibers would all
  // queue for it). Woken by the timer (or an unpark meant for an older
  // wait), we are still on the list and unlink ourselves.
  if (!me.linked.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(fiber_mu_);
  if (me.linked.load(std::memory_order_relaxed)) UnlinkLocked(me);
}

void EventWord::UnlinkLocked(FiberWaiter& w) {
  // The first live entry fills the hole (one other waiter's index changes);
  // the wake-up order shifts a little, which only changes who runs first.
  const size_t i = w.index;
  if (i != fiber_first_) {
    fiber_waiters_[i] = fiber_waiters_[fiber_first_];
    fiber_waiters_[i].waiter->index = i;
  }
  ++fiber_first_;
  if (fiber_first_ == fiber_waiters_.size()) {
    fiber_waiters_.clear();
    fiber_first_ = 0;
  }
  w.linked.store(false, std::memory_order_relaxed);
  fiber_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void EventWord::WakeFibers(int n) {
  // Wake-ups of fibers pinned to other workers are handed over in one
  // batch per worker when `batch` goes out of scope (after the lock).
  UnparkBatch batch;
  std::lock_guard<std::mutex> lock(fiber_mu_);
  const size_t first = fiber_first_;
  const size_t end =
      first + std::min<size_t>(static_cast<size_t>(std::max(n, 0)),
                               fiber_waiters_.size() - first);
  // Independent loads, fetched this many entries ahead.
  constexpr size_t kAhead = 8;
  for (size_t i = first; i < std::min(end, first + kAhead); ++i) {
    __builtin_prefetch(fiber_waiters_[i].waiter, 1);
    __builtin_prefetch(fiber_waiters_[i].fiber, 1);
  }
  for (size_t i = first; i < end; ++i) {
    if (i + kAhead < end) {
      __builtin_prefetch(fiber_waiters_[i + kAhead].waiter, 1);
      __builtin_prefetch(fiber_waiters_[i + kAhead].fiber, 1);
    }
    const Parked p = fiber_waiters_[i];
    // Unpark after unlinking: once unlinked, the waiter's frame may go away
    // as soon as its fiber runs (p.fiber was read from the list, not it).
    p.waiter->linked.store(false, std::memory_order_release);
    batch.Unpark(static_cast<Fiber*>(p.fiber));
  }
  fiber_sleepers_.fetch_sub(static_cast<int32_t>(end - first),
                            std::memory_order_seq_cst);
  fiber_first_ = end;
  if (fiber_first_ == fiber_waiters_.size()) {
    fiber_waiters_.clear();
    fiber_first_ = 0;
  }
}

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
  if (Fiber* fiber = CurrentFiber()) {
    SleepFiber(fiber, seen, deadline);
    return;
  }
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
  if (fiber_sleepers_.load(std::memory_order_seq_cst) != 0) {
    WakeFibers(std::max(1, n));
  }
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  syscall(SYS_futex, Address(gen_), FUTEX_WAKE_PRIVATE, std::max(1, n), nullptr,
          nullptr, 0);
}

#else  // !__linux__

// Without futexes: a short timed nap (correct, slower to wake).
void EventWord::Sleep(uint32_t seen, Deadline deadline) {
  if (Fiber* fiber = CurrentFiber()) {
    SleepFiber(fiber, seen, deadline);
    return;
  }
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (gen_.load(std::memory_order_seq_cst) == seen) {
    std::this_thread::sleep_until(std::min(
        deadline,
        std::chrono::steady_clock::now() + std::chrono::microseconds(50)));
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void EventWord::Signal(int n) {
  gen_.fetch_add(1, std::memory_order_seq_cst);
  if (fiber_sleepers_.load(std::memory_order_seq_cst) != 0) {
    WakeFibers(std::max(1, n));
  }
}

#endif

}  // namespace tandem::sim::internal
