#include "sim/fiber.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "base/fiber_local.h"
#include "base/math_tally.h"
#include "gtest/gtest.h"

namespace tandem::sim::internal {
namespace {

thread_local int t_owner = -1;
const bool kOwnerIsFiberLocal =
    base::RegisterFiberLocal<int>([]() -> int& { return t_owner; }, -1);

TEST(FiberTest, EveryFiberRunsOnceOnAWorker) {
  FiberScheduler scheduler({.workers = 2, .stack_bytes = 64 << 10});
  EXPECT_EQ(scheduler.workers(), 2);
  std::vector<std::atomic<int>> runs(100);
  std::atomic<int> on_fiber{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(scheduler
                    .Spawn([&, i] {
                      runs[i].fetch_add(1);
                      if (CurrentFiber() != nullptr) on_fiber.fetch_add(1);
                    })
                    .ok());
  }
  EXPECT_EQ(CurrentFiber(), nullptr);
  scheduler.Run();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(runs[i].load(), 1) << i;
  EXPECT_EQ(on_fiber.load(), 100);
}

// Fibers pass a token around a ring by parking and unparking each other,
// across both workers: each hand-over is seen exactly once, in order.
TEST(FiberTest, ParkAndUnparkPassATokenAroundARing) {
  constexpr int kFibers = 16;
  constexpr int kRounds = 50;
  FiberScheduler scheduler({.workers = 2, .stack_bytes = 64 << 10});
  std::vector<std::atomic<Fiber*>> self(kFibers);
  std::atomic<int> token{0};
  std::atomic<int> started{0};
  std::vector<int> seen;
  for (int i = 0; i < kFibers; ++i) {
    ASSERT_TRUE(scheduler
                    .Spawn([&, i] {
                      self[i].store(CurrentFiber());
                      started.fetch_add(1);
                      while (started.load() < kFibers) YieldCurrentFiber();
                      for (int round = 0; round < kRounds; ++round) {
                        const int mine = round * kFibers + i;
                        while (token.load() != mine) {
                          ParkCurrentFiber(FiberDeadline::max());
                        }
                        seen.push_back(mine);
                        token.store(mine + 1);
                        UnparkFiber(self[(i + 1) % kFibers].load());
                      }
                    })
                    .ok());
  }
  scheduler.Run();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kFibers * kRounds));
  for (int k = 0; k < kFibers * kRounds; ++k) EXPECT_EQ(seen[k], k);
}

// A park with a deadline and no unpark returns once the deadline passed.
TEST(FiberTest, ParkReturnsAtItsDeadline) {
  FiberScheduler scheduler({.workers = 1, .stack_bytes = 64 << 10});
  bool late_enough = false;
  ASSERT_TRUE(scheduler
                  .Spawn([&] {
                    const auto until = std::chrono::steady_clock::now() +
                                       std::chrono::milliseconds(20);
                    while (std::chrono::steady_clock::now() < until) {
                      ParkCurrentFiber(until);
                    }
                    late_enough = std::chrono::steady_clock::now() >= until;
                  })
                  .ok());
  scheduler.Run();
  EXPECT_TRUE(late_enough);
}

// Registered thread_locals follow their fiber across switches; the worker
// thread's own value is untouched.
TEST(FiberTest, FiberLocalsFollowTheirFiber) {
  ASSERT_TRUE(kOwnerIsFiberLocal);
  constexpr int kFibers = 8;
  FiberScheduler scheduler({.workers = 1, .stack_bytes = 64 << 10});
  std::vector<int> wrong(kFibers, 0);
  std::vector<int> initial(kFibers, 0);
  for (int i = 0; i < kFibers; ++i) {
    ASSERT_TRUE(scheduler
                    .Spawn([&, i] {
                      initial[i] = t_owner;
                      t_owner = i;
                      for (int k = 0; k < 20; ++k) {
                        YieldCurrentFiber();  // every other fiber runs
                        wrong[i] += t_owner != i;
                      }
                    })
                    .ok());
  }
  t_owner = 99;
  scheduler.Run();
  EXPECT_EQ(t_owner, 99);
  for (int i = 0; i < kFibers; ++i) {
    EXPECT_EQ(initial[i], -1) << i;
    EXPECT_EQ(wrong[i], 0) << i;
  }
}

double BurnCpu(double seconds) {
  const double start = base::ThreadCpuSeconds();
  volatile double x = 0;
  while (base::ThreadCpuSeconds() - start < seconds) x = x + 1;
  return x;
}

// With track_cpu each fiber's base::ThreadCpuSeconds() counts only its own
// slices: a fiber that yields while another burns 30 ms sees little.
TEST(FiberTest, TrackedCpuTimeChargesEachFiberItsOwnSlices) {
  FiberScheduler scheduler(
      {.workers = 1, .stack_bytes = 64 << 10, .track_cpu = true});
  double idle_cpu = -1;
  double busy_cpu = -1;
  ASSERT_TRUE(scheduler
                  .Spawn([&] {
                    const double start = base::ThreadCpuSeconds();
                    for (int k = 0; k < 10; ++k) YieldCurrentFiber();
                    idle_cpu = base::ThreadCpuSeconds() - start;
                  })
                  .ok());
  ASSERT_TRUE(scheduler
                  .Spawn([&] {
                    const double start = base::ThreadCpuSeconds();
                    for (int k = 0; k < 10; ++k) {
                      BurnCpu(0.003);
                      YieldCurrentFiber();
                    }
                    busy_cpu = base::ThreadCpuSeconds() - start;
                  })
                  .ok());
  scheduler.Run();
  EXPECT_GE(busy_cpu, 0.030);
  // The idle fiber's slices are a few switches: far below the 30 ms the
  // other burnt between them (a generous bound for a loaded machine).
  EXPECT_LT(idle_cpu, 0.010);
}

}  // namespace
}  // namespace tandem::sim::internal

namespace tandem::sim::internal {
namespace {

// Deep enough to pass any small stack: 1 KiB a frame, not a tail call.
int Recurse(int n) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(n);
  return n == 0 ? frame[0] : Recurse(n - 1) + frame[0];
}

// Issue 25: a fiber that runs past its stack says so before the process
// dies (it was a bare SIGSEGV). Sanitizer builds watch stacks themselves.
TEST(FiberDeathTest, AStackOverflowIsNamed) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers report stack overflows themselves";
#endif
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        FiberScheduler scheduler({.workers = 1, .stack_bytes = 16 << 10});
        if (scheduler.Spawn([] { Recurse(4096); }).ok()) scheduler.Run();
      },
      "a rank's fiber overflowed its stack of 16 KiB");
}

}  // namespace
}  // namespace tandem::sim::internal
