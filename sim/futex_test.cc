#include "sim/futex.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "sim/fiber.h"

namespace tandem::sim::internal {
namespace {

using std::chrono::steady_clock;

// Fibers that sleep on one word until a flag is set, counting their returns
// from Sleep; the test body drives them from fiber 0 (the signaller).
struct Sleepers {
  EventWord word;
  std::atomic<int> parked{0};  // inside the wait loop
  std::atomic<int> woken{0};   // returned from a Sleep
  std::atomic<bool> release{false};
};

// Waits (yielding the worker) until `n` fibers sit in Sleep.
void AwaitSleepers(const EventWord& word, int n) {
  const auto give_up = steady_clock::now() + std::chrono::seconds(30);
  while (word.sleepers() < n && steady_clock::now() < give_up) {
    YieldCurrentFiber();
  }
  ASSERT_EQ(word.sleepers(), n);
}

// Signal(n) wakes at most n of the parked fibers; the rest stay on the list
// until a later Signal() wakes every one of them.
TEST(EventWordTest, SignalNWakesAtMostNFibersAndSignalWakesTheRest) {
  // Enough that the wake-up hands the other worker its fibers in several
  // chunks (UnparkBatch).
  constexpr int kSleepers = 400;
  Sleepers s;
  FiberScheduler scheduler({.workers = 2, .stack_bytes = 64 << 10});
  for (int i = 0; i < kSleepers; ++i) {
    ASSERT_TRUE(scheduler
                    .Spawn([&s] {
                      while (!s.release.load()) {
                        const uint32_t gen = s.word.generation();
                        if (s.release.load()) break;
                        s.word.Sleep(gen, EventWord::Deadline::max());
                        s.woken.fetch_add(1);
                      }
                    })
                    .ok());
  }
  ASSERT_TRUE(
      scheduler
          .Spawn([&s] {
            AwaitSleepers(s.word, kSleepers);
            s.word.Signal(3);
            // The three woken fibers loop and park again.
            const auto give_up = steady_clock::now() + std::chrono::seconds(30);
            while (s.woken.load() < 3 && steady_clock::now() < give_up) {
              YieldCurrentFiber();
            }
            AwaitSleepers(s.word, kSleepers);
            EXPECT_EQ(s.woken.load(), 3);
            s.release.store(true);
            s.word.Signal();
          })
          .ok());
  scheduler.Run();
  EXPECT_EQ(s.woken.load(), 3 + kSleepers);
  EXPECT_EQ(s.word.sleepers(), 0);
}

// Fibers whose deadlines pass leave the list themselves, from its middle,
// while the others stay parked; a Signal then wakes exactly those left.
TEST(EventWordTest, TimedOutFibersLeaveTheListAndTheOthersStillWake) {
  constexpr int kSleepers = 24;
  Sleepers s;
  std::atomic<int> timed_out{0};
  FiberScheduler scheduler({.workers = 2, .stack_bytes = 64 << 10});
  for (int i = 0; i < kSleepers; ++i) {
    const bool with_deadline = i % 3 == 1;  // every third, from the middle
    ASSERT_TRUE(
        scheduler
            .Spawn([&s, &timed_out, with_deadline] {
              const uint32_t gen = s.word.generation();
              if (s.release.load()) return;
              const auto deadline =
                  with_deadline
                      ? steady_clock::now() + std::chrono::milliseconds(50)
                      : EventWord::Deadline::max();
              while (s.word.generation() == gen &&
                     (!with_deadline || steady_clock::now() < deadline)) {
                s.word.Sleep(gen, deadline);
              }
              if (s.word.generation() == gen) {
                timed_out.fetch_add(1);
              } else {
                s.woken.fetch_add(1);
              }
            })
            .ok());
  }
  ASSERT_TRUE(scheduler
                  .Spawn([&s, &timed_out] {
                    const auto give_up =
                        steady_clock::now() + std::chrono::seconds(30);
                    while (timed_out.load() < kSleepers / 3 &&
                           steady_clock::now() < give_up) {
                      YieldCurrentFiber();
                    }
                    EXPECT_EQ(timed_out.load(), kSleepers / 3);
                    AwaitSleepers(s.word, kSleepers - kSleepers / 3);
                    s.word.Signal();
                  })
                  .ok());
  scheduler.Run();
  EXPECT_EQ(timed_out.load(), kSleepers / 3);
  EXPECT_EQ(s.woken.load(), kSleepers - kSleepers / 3);
  EXPECT_EQ(s.word.sleepers(), 0);
}

// On plain threads Sleep is a futex wait: a Signal ends it, and a deadline
// ends it when nobody signals.
TEST(EventWordTest, ThreadsWakeOnSignalAndAtTheirDeadline) {
  EventWord word;
  const uint32_t gen = word.generation();
  const auto start = steady_clock::now();
  word.Sleep(gen, start + std::chrono::milliseconds(30));
  EXPECT_GE(steady_clock::now() - start, std::chrono::milliseconds(30));

  std::atomic<bool> done{false};
  std::thread sleeper([&] {
    const uint32_t seen = word.generation();
    while (word.generation() == seen) {
      word.Sleep(seen, steady_clock::now() + std::chrono::seconds(30));
    }
    done.store(true);
  });
  const auto give_up = steady_clock::now() + std::chrono::seconds(30);
  while (word.sleepers() == 0 && steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  word.Signal();
  sleeper.join();
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace tandem::sim::internal
