// Failure scenarios: fingerprint mismatches, timeouts, ranks that fail,
// throw or leave early, and injected faults. Every one must end promptly
// (each test runs under a watchdog) with an error that names the ranks.
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using FailureTest = testing::ModeTest;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// Options whose timeout is far beyond the watchdog: a test that passes shows
// that the failure was detected without waiting for any timeout.
Options NoTimeout() {
  Options options;
  options.timeout = absl::Hours(1);
  return options;
}

std::vector<float> Ones(int64_t n) { return std::vector<float>(n, 1.0f); }

// ------------------------------------------------------------ mismatch ---

struct MismatchCase {
  std::string name;
  // What rank 1 issues as its collective #0 while rank 0 issues
  // AllReduce(f32 x 8, sum).
  std::function<std::unique_ptr<comm::Work>(comm::Communicator&,
                                            std::vector<float>&)>
      rank1;
  std::string rank1_fingerprint;
};

class MismatchTest : public testing::WatchdogTest,
                     public ::testing::WithParamInterface<
                         std::tuple<MismatchCase, RankExecution>> {};

TEST_P(MismatchTest, FailsEveryRankShowingBothFingerprints) {
  const MismatchCase& c = std::get<0>(GetParam());
  Options options = NoTimeout();
  options.ranks = std::get<1>(GetParam());
  RunResult result = sim::Run(
      2,
      [&](int rank, comm::Communicator& comm) {
        std::vector<float> buf = Ones(16);
        std::unique_ptr<comm::Work> work =
            rank == 0 ? comm.AllReduce(
                            comm::HostView(buf.data(), 8, comm::DType::kF32),
                            comm::ReduceOp::kSum)
                      : c.rank1(comm, buf);
        return work->Wait();
      },
      options);
  const std::string both = absl::StrCat(
      "collective mismatch at collective #0: rank 0 issued #0 AllReduce(f32 x "
      "8, sum) but rank 1 issued ",
      c.rank1_fingerprint);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kFailedPrecondition)
        << result.ranks[r];
    EXPECT_THAT(Msg(result.ranks[r]), HasSubstr(both));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sim, MismatchTest,
    ::testing::Combine(
        ::testing::Values(
            MismatchCase{"Op",
                         [](comm::Communicator& comm, std::vector<float>& b) {
                           return comm.Broadcast(
                               comm::HostView(b.data(), 8, comm::DType::kF32),
                               0);
                         },
                         "#0 Broadcast(f32 x 8, root 0)"},
            MismatchCase{"DType",
                         [](comm::Communicator& comm, std::vector<float>& b) {
                           return comm.AllReduce(
                               comm::HostView(b.data(), 8, comm::DType::kI32),
                               comm::ReduceOp::kSum);
                         },
                         "#0 AllReduce(i32 x 8, sum)"},
            MismatchCase{"Count",
                         [](comm::Communicator& comm, std::vector<float>& b) {
                           return comm.AllReduce(
                               comm::HostView(b.data(), 9, comm::DType::kF32),
                               comm::ReduceOp::kSum);
                         },
                         "#0 AllReduce(f32 x 9, sum)"},
            MismatchCase{"ReduceOp",
                         [](comm::Communicator& comm, std::vector<float>& b) {
                           return comm.AllReduce(
                               comm::HostView(b.data(), 8, comm::DType::kF32),
                               comm::ReduceOp::kMax);
                         },
                         "#0 AllReduce(f32 x 8, max)"},
            MismatchCase{"Barrier",
                         [](comm::Communicator& comm, std::vector<float>&) {
                           // Barrier() waits itself; return its status as a
                           // Work.
                           return comm::MakeCompletedWork(comm.Barrier());
                         },
                         "#0 Barrier()"}),
        ::testing::Values(RankExecution::kThreads, RankExecution::kFibers)),
    [](const ::testing::TestParamInfo<std::tuple<MismatchCase, RankExecution>>&
           info) {
      return std::get<0>(info.param).name +
             (std::get<1>(info.param) == RankExecution::kFibers ? "Fibers"
                                                                : "Threads");
    });

TEST_P(FailureTest, RootMismatchNamesBothRoots) {
  RunResult result = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) {
        std::vector<float> b = Ones(4);
        return comm.Broadcast(comm::HostView(absl::MakeSpan(b)), rank)->Wait();
      },
      NoTimeout());
  for (const absl::Status& s : result.ranks) {
    EXPECT_THAT(Msg(s), HasSubstr("rank 0 issued #0 Broadcast(f32 x 4, root 0) "
                                  "but rank 1 issued #0 Broadcast(f32 x 4, "
                                  "root 1)"));
  }
}

TEST_P(FailureTest, MismatchLaterInTheStreamNamesTheOddRank) {
  // Three ranks agree on #0; at #1 rank 2 issues a Barrier instead.
  RunResult result = RunRanks(
      3,
      [](int rank, comm::Communicator& comm) {
        std::vector<float> b = Ones(4);
        auto view = comm::HostView(absl::MakeSpan(b));
        if (absl::Status s = comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
            !s.ok()) {
          return s;
        }
        if (rank == 2) return comm.Barrier();
        return comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
      },
      NoTimeout());
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(Msg(result.ranks[r]),
                AllOf(HasSubstr("collective mismatch at collective #1"),
                      HasSubstr("issued #1 AllReduce(f32 x 4, sum)"),
                      HasSubstr("rank 2 issued #1 Barrier()")));
  }
}

TEST_P(FailureTest, SendRecvCountMismatch) {
  RunResult result = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) {
        std::vector<float> b = Ones(9);
        if (rank == 0) {
          return comm.Send(comm::HostView(b.data(), 8, comm::DType::kF32), 1)
              ->Wait();
        }
        return comm.Recv(comm::HostView(b.data(), 9, comm::DType::kF32), 0)
            ->Wait();
      },
      NoTimeout());
  for (const absl::Status& s : result.ranks) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(Msg(s), HasSubstr("point-to-point mismatch on message #0 from "
                                  "rank 0 to rank 1: rank 0 issued #0 "
                                  "Send(f32 x 8, to rank 1) but rank 1 issued "
                                  "#0 Recv(f32 x 9, from rank 0)"));
  }
}

// ------------------------------------------------------------- timeout ---

TEST_P(FailureTest, TimeoutNamesTheRanksThatNeverArrived) {
  testing::Latch rank0_timed_out(1);
  Options options;
  options.timeout = absl::Milliseconds(200);
  RunResult result = RunRanks(
      3,
      [&](int rank, comm::Communicator& comm) {
        std::vector<float> b = Ones(4);
        auto view = comm::HostView(absl::MakeSpan(b));
        if (rank != 0) rank0_timed_out.Wait();  // busy elsewhere
        absl::Status s = comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
        if (rank == 0) rank0_timed_out.CountDown();
        return s;
      },
      options);
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(
      Msg(result.ranks[0]),
      AllOf(HasSubstr("rank 0: #0 AllReduce(f32 x 4, sum) failed"),
            HasSubstr("collective #0 AllReduce(f32 x 4, sum) did not "
                      "complete within 200ms"),
            HasSubstr("rank 1 (it has issued 0 collectives), rank 2 "
                      "(it has issued 0 collectives) never issued it")));
  // The latecomers find the run already failed, with the same reason.
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(Msg(result.ranks[r]), HasSubstr("did not complete within"));
  }
}

// With many absent ranks the message names the first 8 and counts the rest.
TEST_P(FailureTest, TimeoutNamesAtMostEightRanks) {
  testing::Latch rank0_timed_out(1);
  Options options;
  options.timeout = absl::Milliseconds(200);
  RunResult result = RunRanks(
      12,
      [&](int rank, comm::Communicator& comm) {
        if (rank != 0) {
          rank0_timed_out.Wait();
          return absl::OkStatus();
        }
        std::vector<float> b = Ones(4);
        absl::Status s = comm.AllReduce(comm::HostView(absl::MakeSpan(b)),
                                        comm::ReduceOp::kSum)
                             ->Wait();
        rank0_timed_out.CountDown();
        return s;
      },
      options);
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Msg(result.ranks[0]),
              AllOf(HasSubstr("rank 8 (it has issued 0 collectives) and 3 "
                              "more rank(s) never issued it"),
                    ::testing::Not(HasSubstr("rank 9 ("))));
}

TEST_P(FailureTest, RecvTimeoutNamesTheMissingSender) {
  testing::Latch done(1);
  Options options;
  options.timeout = absl::Milliseconds(100);
  RunResult result = RunRanks(
      2,
      [&](int rank, comm::Communicator& comm) {
        std::vector<float> b = Ones(4);
        if (rank == 1) {
          done.Wait();
          return absl::OkStatus();
        }
        absl::Status s =
            comm.Recv(comm::HostView(absl::MakeSpan(b)), 1)->Wait();
        done.CountDown();
        return s;
      },
      options);
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Msg(result.ranks[0]),
              AllOf(HasSubstr("message #0 from rank 1 to rank 0 (f32 x 4) did "
                              "not complete within 100ms"),
                    HasSubstr("rank 1 (the matching Send; it has issued 0 "
                              "Sends to rank 0) never issued it")));
}

// ------------------------------------------------ ranks that stop early ---

TEST_P(FailureTest, RankThatReturnsEarlyFailsTheWaitersAtOnce) {
  RunResult result = RunRanks(
      3,
      [](int rank, comm::Communicator& comm) {
        std::vector<float> b = Ones(4);
        auto view = comm::HostView(absl::MakeSpan(b));
        if (absl::Status s = comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
            !s.ok()) {
          return s;
        }
        if (rank == 1) return absl::OkStatus();  // skips collective #1
        return comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
      },
      NoTimeout());
  EXPECT_TRUE(result.ranks[1].ok());
  for (int r : {0, 2}) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(Msg(result.ranks[r]),
                HasSubstr("collective #1 AllReduce(f32 x 4, sum) can never "
                          "complete: rank 1 (after issuing 1 collectives) "
                          "returned from its function without issuing it"));
  }
}

TEST_P(FailureTest, RankErrorAbortsPendingAndFutureCollectives) {
  RunResult result = RunRanks(
      3,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        std::vector<float> b = Ones(4);
        auto view = comm::HostView(absl::MakeSpan(b));
        if (rank == 2) return absl::NotFoundError("no data for rank 2");
        absl::Status pending =
            comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
        // A later collective fails at once: an already-failed Work.
        std::unique_ptr<comm::Work> later =
            comm.AllReduce(view, comm::ReduceOp::kSum);
        if (!later->IsCompleted()) {
          return absl::InternalError("a collective after the abort is pending");
        }
        if (later->Wait().code() != absl::StatusCode::kAborted) {
          return absl::InternalError(
              absl::StrCat("later: ", later->Wait().ToString()));
        }
        return pending;
      },
      NoTimeout());
  EXPECT_EQ(result.ranks[2].code(), absl::StatusCode::kNotFound);
  for (int r : {0, 1}) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kAborted)
        << result.ranks[r];
    EXPECT_THAT(Msg(result.ranks[r]),
                HasSubstr("rank 2 failed: NOT_FOUND: no data for rank 2"));
  }
  EXPECT_EQ(result.status().message(), "rank 2: no data for rank 2");
}

TEST_P(FailureTest, RankThatThrowsAbortsTheOthers) {
  RunResult result = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        if (rank == 1) throw std::runtime_error("kaboom");
        std::vector<float> b = Ones(4);
        return comm
            .AllReduce(comm::HostView(absl::MakeSpan(b)), comm::ReduceOp::kSum)
            ->Wait();
      },
      NoTimeout());
  EXPECT_EQ(result.ranks[1].code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Msg(result.ranks[1]),
              HasSubstr("rank 1 threw an exception: kaboom"));
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(result.ranks[0]),
              HasSubstr("rank 1 failed: INTERNAL: sim: rank 1 threw an "
                        "exception: kaboom"));
}

TEST_P(FailureTest, ThrowingWithAWorkInFlightAbortsAtOnce) {
  // Rank 1 leaves its AllReduce in flight and throws. Rank 0 never joins the
  // AllReduce; it waits for a message rank 1 will never send, and must be
  // released by the abort, not by a timeout.
  RunResult result = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        std::vector<float> b = Ones(4);
        auto view = comm::HostView(absl::MakeSpan(b));
        if (rank == 1) {
          std::unique_ptr<comm::Work> work =
              comm.AllReduce(view, comm::ReduceOp::kSum);
          throw std::runtime_error("kaboom");
        }
        return comm.Recv(view, 1)->Wait();
      },
      NoTimeout());
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(result.ranks[0]),
              HasSubstr("rank 1 threw an exception while #0 AllReduce(f32 x "
                        "4, sum) was in flight"));
  EXPECT_THAT(Msg(result.ranks[1]), HasSubstr("kaboom"));
}

// ------------------------------------------------------ injected faults ---

TEST_P(FailureTest, InjectedFailureAtTheKthCollective) {
  Options options = NoTimeout();
  options.faults = {Fault::FailAt(/*rank=*/1, /*collective=*/2)};
  std::vector<int> completed(3, 0);
  RunResult result = RunRanks(
      3,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        for (int k = 0; k < 4; ++k) {
          std::vector<float> b = Ones(4);
          absl::Status s = comm.AllReduce(comm::HostView(absl::MakeSpan(b)),
                                          comm::ReduceOp::kSum)
                               ->Wait();
          if (!s.ok()) return s;
          if (b[3] != 3.0f) return absl::InternalError("wrong sum");
          completed[rank] = k + 1;
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_EQ(result.ranks[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(result.ranks[1]),
              HasSubstr("injected fault: rank 1 fails at #2 AllReduce(f32 x 4, "
                        "sum)"));
  for (int r : {0, 2}) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kAborted);
    EXPECT_THAT(Msg(result.ranks[r]),
                HasSubstr("rank 1 failed: sim: injected fault: rank 1 fails "
                          "at #2"));
  }
  // Collectives #0 and #1 completed everywhere, #2 nowhere.
  EXPECT_EQ(completed, (std::vector<int>{2, 2, 2}));
}

TEST_P(FailureTest, InjectedDelayShorterThanTheTimeoutIsHarmless) {
  Options options = NoTimeout();
  options.faults = {Fault::DelayAt(1, 0, absl::Milliseconds(30)),
                    Fault::DelayAt(0, 1, absl::Milliseconds(30))};
  RunResult result = RunRanks(
      2,
      [](int, comm::Communicator& comm) -> absl::Status {
        for (int k = 0; k < 3; ++k) {
          std::vector<float> b = Ones(4);
          if (absl::Status s = comm.AllReduce(comm::HostView(absl::MakeSpan(b)),
                                              comm::ReduceOp::kSum)
                                   ->Wait();
              !s.ok()) {
            return s;
          }
          if (b[0] != 2.0f) return absl::InternalError("wrong sum");
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(FailureTest, InjectedDelayLongerThanTheTimeoutTimesOut) {
  Options options;
  options.timeout = absl::Milliseconds(100);
  // A ten-minute straggler: its sleep ends when the run aborts.
  options.faults = {Fault::DelayAt(1, 0, absl::Minutes(10))};
  RunResult result = RunRanks(
      2,
      [](int, comm::Communicator& comm) {
        std::vector<float> b = Ones(4);
        return comm
            .AllReduce(comm::HostView(absl::MakeSpan(b)), comm::ReduceOp::kSum)
            ->Wait();
      },
      options);
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(
      Msg(result.ranks[0]),
      HasSubstr("rank 1 (it has issued 0 collectives) never issued it"));
  EXPECT_EQ(result.ranks[1].code(), absl::StatusCode::kDeadlineExceeded);
}

TANDEM_SIM_TEST_BOTH_MODES(FailureTest);

}  // namespace
}  // namespace tandem::sim
