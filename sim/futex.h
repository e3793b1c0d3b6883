// A 32-bit event word that threads can sleep on (a Linux futex), for the
// simulated cluster's waits. Unlike std::atomic::wait, a sleep here has a
// deadline, so every wait in sim stays bounded; unlike a condition variable,
// no mutex is taken to sleep or to wake, and one call wakes every sleeper.
//
// Protocol (an "eventcount"): a waiter reads the generation, checks its
// condition, and sleeps only if the generation is unchanged; a signaller
// changes the condition, bumps the generation and wakes. Every access is
// seq_cst, so a waiter either sees the new condition or sleeps on an old
// generation, which the signaller's wake-up (or the kernel's compare) ends.
//
//   EventWord word;
//   // waiter                                  // signaller
//   for (;;) {                                 ready.store(true);
//     const uint32_t gen = word.generation();  word.Signal();
//     if (ready.load()) break;
//     word.Sleep(gen, deadline);
//   }
//
// The sim's one waiting interface, for both ways of running ranks: on an OS
// thread Sleep is a futex wait; on a fiber (sim/fiber.h, Options::ranks =
// kFibers) it parks the fiber on the word's own list and lets its worker
// run other fibers, with the deadline on the worker's timer. Signal wakes
// both kinds of sleeper.
//
// Thread-safe. Sleep may return early (a spurious or shared wake-up): callers
// re-check their condition in a loop.
#ifndef TANDEM_SIM_FUTEX_H_
#define TANDEM_SIM_FUTEX_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace tandem::sim::internal {

class EventWord {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  uint32_t generation() const { return gen_.load(std::memory_order_seq_cst); }

  // Sleeps while the generation is still `seen`, at most until `deadline`
  // (Deadline::max(): no deadline; callers cap it to stay bounded).
  void Sleep(uint32_t seen, Deadline deadline);

  // Bumps the generation and wakes every sleeper (no system call when
  // nobody sleeps).
  void Signal() { Signal(kAll); }
  // Bumps the generation and wakes at most `n` sleepers (n >= 1).
  void Signal(int n);

  // Threads and fibers inside Sleep() now (an upper bound while they enter
  // or leave).
  int sleepers() const {
    return sleepers_.load(std::memory_order_seq_cst) +
           fiber_sleepers_.load(std::memory_order_seq_cst);
  }

 private:
  // A parked fiber, on its own stack while it sleeps.
  struct FiberWaiter {
    void* fiber = nullptr;  // sim::internal::Fiber
    // Its place in fiber_waiters_ while linked (guarded by fiber_mu_).
    size_t index = 0;
    // Set and cleared under fiber_mu_; the woken fiber reads it without the
    // lock (once cleared it stays cleared).
    std::atomic<bool> linked{false};
  };
  // The waiting list holds the fiber beside its waiter, so a wake-up reads
  // the list in order and prefetches every waiter and fiber ahead: with
  // thousands of fibers parked, each waiter is a cold line on its own stack,
  // and a list linked through the waiters made waking them a chain of
  // dependent cache misses.
  struct Parked {
    FiberWaiter* waiter;
    void* fiber;
  };
  void SleepFiber(void* fiber, uint32_t seen, Deadline deadline);
  void WakeFibers(int n);
  // Takes `w` off the list (a timed-out wait). Requires fiber_mu_.
  void UnlinkLocked(FiberWaiter& w);

  static constexpr int kAll = 0x7fffffff;
  std::atomic<uint32_t> gen_{0};
  std::atomic<int32_t> sleepers_{0};
  // Fibers announced (counted before they check the generation, like
  // sleepers_) and parked on the list.
  std::atomic<int32_t> fiber_sleepers_{0};
  std::mutex fiber_mu_;  // guards the list; never held across a park
  // Parked fibers in wake-up order: fiber_waiters_[fiber_first_..] (the
  // entries before fiber_first_ are woken; the vector is emptied, keeping
  // its capacity, once every entry is).
  std::vector<Parked> fiber_waiters_;
  size_t fiber_first_ = 0;
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_FUTEX_H_
