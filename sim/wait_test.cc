// The spin-then-park wait (sim/wait_policy.h, Group::Await): when it spins,
// that every spin ends at the caller's Wait timeout and at the operation
// timeout however long Options::spin is, and that no wake-up is lost
// whichever rank arrives last, at 2 ranks (spinning or not) and at many
// ranks (parked on the futex). A lost wake-up fails these tests with the
// operation timeout's error (or the watchdog), never by hanging CI.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "gtest/gtest.h"
#include "sim/group.h"
#include "sim/options.h"
#include "sim/sim.h"
#include "sim/test_util.h"
#include "sim/wait_policy.h"

namespace tandem::sim {
namespace {

using WaitTest = testing::ModeTest;

TEST(WaitPolicyTest, SpinsOnlyWhileEveryRankHasACpuOfItsOwn) {
  Options options;
  options.spin = absl::Microseconds(100);
  EXPECT_EQ(internal::EffectiveSpin(2, options, 2), absl::Microseconds(100));
  EXPECT_EQ(internal::EffectiveSpin(1, options, 1), absl::Microseconds(100));
  // One rank more than CPUs (taskset -c 0 with 2 ranks), and 8192 ranks:
  // every wait parks at once.
  EXPECT_EQ(internal::EffectiveSpin(2, options, 1), absl::ZeroDuration());
  EXPECT_EQ(internal::EffectiveSpin(8192, options, 64), absl::ZeroDuration());
  options.spin = absl::Microseconds(-5);
  EXPECT_EQ(internal::EffectiveSpin(2, options, 2), absl::ZeroDuration());
  options.spin = absl::Microseconds(100);
  options.ranks = RankExecution::kFibers;
  EXPECT_EQ(internal::EffectiveSpin(2, options, 2), absl::ZeroDuration());
  EXPECT_GE(internal::UsableCpus(), 1);
}

TEST(WaitPolicyTest, SpinBudgetHalvesWhenItRunsOutAndDoublesWhenItPays) {
  internal::SpinBudget budget;
  budget.Reset(absl::Microseconds(100));
  EXPECT_EQ(budget.Next(), 100000);
  budget.Ended(100000, /*reached=*/false);
  EXPECT_EQ(budget.Next(), 50000);
  budget.Ended(50000, false);
  EXPECT_EQ(budget.Next(), 25000);
  // Down to the floor, never below (a rank keeps spinning a little).
  for (int i = 0; i < 20; ++i) budget.Ended(budget.Next(), false);
  const int64_t floor = absl::ToInt64Nanoseconds(internal::SpinBudget::kFloor);
  // Every kProbeEvery-th wait spins in full, whatever the budget.
  int probes = 0;
  for (uint32_t i = 0; i < internal::SpinBudget::kProbeEvery; ++i) {
    const int64_t next = budget.Next();
    if (next == 100000) {
      ++probes;
    } else {
      EXPECT_EQ(next, floor);
    }
  }
  EXPECT_EQ(probes, 1);
  // A probe that runs out leaves the budget where it was (at the floor).
  budget.Ended(100000, /*reached=*/false);
  EXPECT_EQ(budget.Next(), floor);
  // A spin that pays doubles the next one, up to the maximum.
  budget.Ended(floor, /*reached=*/true);
  int64_t next = budget.Next();
  EXPECT_EQ(next, 2 * floor);
  for (int i = 0; i < 20; ++i) {
    budget.Ended(next, true);
    next = budget.Next();
  }
  EXPECT_EQ(next, 100000);
  // No spin configured: never spins.
  budget.Reset(absl::ZeroDuration());
  EXPECT_EQ(budget.Next(), 0);
  budget.Ended(0, true);
  EXPECT_EQ(budget.Next(), 0);
}

// A poll (kPoll) never spins: it does not even look at the condition, and
// it leaves the rank's spin budget alone. A real wait checks the condition
// from its first round on (before any clock read) and returns as soon as
// it holds.
TEST(WaitPolicyTest, APollNeverSpinsAndAWaitEndsWhenTheConditionHolds) {
  Options options;
  options.ranks = RankExecution::kThreads;
  options.spin = absl::Seconds(3600);
  // One rank: it always has a CPU of its own, so the group spins.
  internal::Group group(1, options);
  int checks = 0;
  EXPECT_FALSE(group.Spin(0, internal::kPoll, internal::Deadline::max(), [&] {
    ++checks;
    return true;
  }));
  EXPECT_EQ(checks, 0);
  checks = 0;
  EXPECT_TRUE(group.Spin(0, internal::Deadline::max(),
                         internal::Deadline::max(),
                         [&] { return ++checks == 3; }));
  EXPECT_EQ(checks, 3);
  // A condition that never holds: the spin ends at the operation deadline
  // (here already passed), found at the first clock read, after 64 rounds.
  checks = 0;
  EXPECT_FALSE(group.Spin(0, internal::Deadline::max(),
                          internal::DeadlineAfter(absl::ZeroDuration()), [&] {
                            ++checks;
                            return false;
                          }));
  EXPECT_EQ(checks, 64);
}

// The operation deadline set at issue reads the coarse clock: the same
// clock as DeadlineAfter's (a wrong clock would be off by years or by the
// time since boot), within a few of its ticks, and "never" stays
// Deadline::max().
TEST(WaitPolicyTest, OpDeadlineIsOnTheSteadyClockWithinATick) {
  EXPECT_EQ(internal::OpDeadlineAfter(absl::InfiniteDuration()),
            internal::Deadline::max());
  const internal::Deadline precise = internal::DeadlineAfter(absl::Hours(1));
  const internal::Deadline coarse = internal::OpDeadlineAfter(absl::Hours(1));
  EXPECT_LT(std::chrono::abs(coarse - precise), std::chrono::seconds(1));
  const internal::Deadline now = internal::DeadlineAfter(absl::ZeroDuration());
  EXPECT_LT(
      std::chrono::abs(internal::OpDeadlineAfter(absl::ZeroDuration()) - now),
      std::chrono::seconds(1));
}

// Spin for up to an hour: the wait must still end at its own timeout.
TEST_P(WaitTest, AnHourOfSpinEndsAtTheWaitTimeout) {
  Options options;
  options.spin = absl::Hours(1);
  testing::Latch timed_out(1);
  RunResult result = RunRanks(
      2,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        std::vector<float> v(2, 1.0f);
        if (rank == 1) timed_out.Wait();
        std::unique_ptr<comm::Work> work = comm.AllReduce(
            comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum);
        if (rank == 0) {
          const absl::Status s = work->Wait(absl::Milliseconds(5));
          timed_out.CountDown();
          if (s.code() != absl::StatusCode::kDeadlineExceeded) {
            return absl::InternalError(
                absl::StrCat("expected the Wait timeout, got ", s.ToString()));
          }
        }
        if (absl::Status s = work->Wait(); !s.ok()) return s;
        if (v[0] != 2.0f || v[1] != 2.0f) {
          return absl::InternalError(absl::StrCat("sum ", v[0], ", ", v[1]));
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
}

// Spin for up to an hour: the operation timeout still fails the wait.
TEST_P(WaitTest, AnHourOfSpinEndsAtTheOperationTimeout) {
  Options options;
  options.spin = absl::Hours(1);
  options.timeout = absl::Milliseconds(200);
  testing::Latch failed(1);
  absl::Status seen_by_rank0;
  RunResult result = RunRanks(
      2,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        if (rank == 1) {
          // Never issues the all-reduce; returns once rank 0 has failed.
          failed.Wait();
          return absl::OkStatus();
        }
        std::vector<float> v(2, 1.0f);
        seen_by_rank0 = comm.AllReduce(comm::HostView(absl::MakeSpan(v)),
                                       comm::ReduceOp::kSum)
                            ->Wait();
        failed.CountDown();
        return seen_by_rank0;
      },
      options);
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(seen_by_rank0.code(), absl::StatusCode::kDeadlineExceeded)
      << seen_by_rank0;
  EXPECT_TRUE(absl::StrContains(seen_by_rank0.message(), "never issued it"))
      << seen_by_rank0;
}

// Thousands of back-to-back all-reduces at 2 ranks, with the late rank
// changing every few rounds (each one naps now and then, so the other
// spins out and parks): every wake-up must arrive. Spin off (always park),
// a spin far shorter than a wake-up, and the default.
TEST_P(WaitTest, NoWakeUpIsLostAtTwoRanks) {
  for (const absl::Duration spin :
       {absl::ZeroDuration(), absl::Nanoseconds(200), Options().spin}) {
    Options options;
    options.spin = spin;
    options.timeout = absl::Seconds(30);  // a lost wake-up fails, not hangs
    constexpr int kRounds = 3000;
    RunResult result = RunRanks(
        2,
        [&](int rank, comm::Communicator& comm) -> absl::Status {
          std::vector<int64_t> v(2);
          for (int i = 0; i < kRounds; ++i) {
            if (i % 97 == 0 && (i / 97) % 2 == rank) {
              testing::Nap(absl::Microseconds(200));
            } else if (i % 7 == rank) {
              std::this_thread::yield();
            }
            v = {rank + i, 1};
            if (absl::Status s =
                    comm.AllReduce(comm::HostView(absl::MakeSpan(v)),
                                   comm::ReduceOp::kSum)
                        ->Wait();
                !s.ok()) {
              return s;
            }
            if (v[0] != 2 * i + 1 || v[1] != 2) {
              return absl::InternalError(absl::StrCat(
                  "round ", i, ": ", v[0], ", ", v[1], " on rank ", rank));
            }
          }
          return absl::OkStatus();
        },
        options);
    EXPECT_TRUE(result.ok()) << "spin " << spin << ": " << result.status();
  }
}

// Many more ranks than cores, so every wait parks on the futex (an hour of
// spin configured, ignored there): a different straggler each round arrives
// last and must wake everyone.
TEST_P(WaitTest, NoWakeUpIsLostAtManyRanks) {
  const int n = 256;
  Options options;
  options.spin = absl::Hours(1);
  options.timeout = absl::Seconds(60);
  RunResult result = RunRanks(
      n,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        for (int i = 0; i < 20; ++i) {
          if (rank == (i * 37) % n) testing::Nap(absl::Microseconds(500));
          int64_t v = rank + i;
          if (absl::Status s =
                  comm.AllReduce(comm::HostView(&v, 1, comm::DType::kI64),
                                 comm::ReduceOp::kSum)
                      ->Wait();
              !s.ok()) {
            return s;
          }
          if (v != int64_t{n} * (n - 1) / 2 + int64_t{n} * i) {
            return absl::InternalError(absl::StrCat("round ", i, ": ", v));
          }
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
}

TANDEM_SIM_TEST_BOTH_MODES(WaitTest);

}  // namespace
}  // namespace tandem::sim
