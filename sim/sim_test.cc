// sim::Run basics: launching, results, determinism, scale, output, naming.
#include "sim/sim.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/rank_printer.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/test_util.h"
#include "sim/thread_name.h"

namespace tandem::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using SimRunTest = testing::ModeTest;

absl::Status AllReduceSum(comm::Communicator& comm, std::vector<float>& v) {
  return comm
      .AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum)
      ->Wait();
}

TEST_P(SimRunTest, RejectsWorldSizeBelowOne) {
  for (int n : {0, -3}) {
    RunResult result =
        RunRanks(n, [](int, comm::Communicator&) { return absl::OkStatus(); });
    EXPECT_EQ(result.launch.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        std::string(result.launch.message()),
        HasSubstr(absl::StrCat("world size must be at least 1; found ", n)));
    EXPECT_FALSE(result.ok());
    EXPECT_TRUE(result.ranks.empty());
  }
  RunResult big = RunRanks(kMaxWorldSize + 1, [](int, comm::Communicator&) {
    return absl::OkStatus();
  });
  EXPECT_THAT(std::string(big.launch.message()),
              HasSubstr(absl::StrCat("at most ", kMaxWorldSize)));
}

TEST_P(SimRunTest, RejectsBadOptions) {
  auto noop = [](int, comm::Communicator&) { return absl::OkStatus(); };
  Options zero_timeout;
  zero_timeout.timeout = absl::ZeroDuration();
  EXPECT_THAT(std::string(RunRanks(2, noop, zero_timeout).launch.message()),
              HasSubstr("Options::timeout must be positive; found 0"));
  Options bad_fault;
  bad_fault.faults = {Fault::FailAt(2, 0)};
  EXPECT_THAT(std::string(RunRanks(2, noop, bad_fault).launch.message()),
              HasSubstr("0 <= rank < world size 2"));
}

// Fibers with the smallest stack (16 KiB) still reduce for hundreds of
// ranks: the reduction's scratch stays off the rank's stack (comm/reduce.cc).
TEST(SimFiberStackTest, ManyRanksAllReduceOnTheSmallestFiberStacks) {
  constexpr int kRanks = 300;
  constexpr int kCount = 4096;
  Options options;
  options.ranks = RankExecution::kFibers;
  options.stack_bytes = 16 << 10;
  RunResult result = sim::Run(
      kRanks,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        std::vector<float> v(kCount, static_cast<float>(rank));
        if (absl::Status s = AllReduceSum(comm, v); !s.ok()) return s;
        const float want = kRanks * (kRanks - 1) / 2.0f;
        for (float x : v) {
          if (x != want) {
            return absl::InternalError(
                absl::StrCat("rank ", rank, " got ", x, ", expected ", want));
          }
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
}

// The same in f64 and in every op, on 3 ranks (the kernels' general path):
// an 8-byte accumulator block must fit the smallest stack as well.
TEST(SimFiberStackTest, DoubleAllReducesOfEveryOpOnTheSmallestFiberStacks) {
  Options options;
  options.ranks = RankExecution::kFibers;
  options.stack_bytes = 16 << 10;
  RunResult result = sim::Run(
      3,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        for (comm::ReduceOp op : comm::kAllReduceOps) {
          std::vector<double> v(5000, static_cast<double>(rank + 1));
          if (absl::Status s =
                  comm.AllReduce(comm::HostView(absl::MakeSpan(v)), op)->Wait();
              !s.ok()) {
            return s;
          }
        }
        std::vector<double> t(5000, 1.0);
        return comm
            .AllReduce(comm::HostView(absl::MakeSpan(t)),
                       comm::ReduceOp::kTreeSum)
            ->Wait();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(SimRunTest, RejectsANegativeStackSize) {
  Options options;
  options.stack_bytes = -1;
  RunResult result = RunRanks(
      2, [](int, comm::Communicator&) { return absl::OkStatus(); }, options);
  EXPECT_EQ(result.launch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.launch.message()),
              HasSubstr("Options::stack_bytes must be >= 0"));
}

// Each rank's thread has the stack Options::stack_bytes asks for.
TEST_P(SimRunTest, RanksRunOnStacksOfTheRequestedSize) {
  if (fibers()) GTEST_SKIP() << "fibers do not run on pthread stacks";
  for (int64_t bytes : {int64_t{1} << 20, int64_t{4} << 20}) {
    Options options;
    options.stack_bytes = bytes;
    std::vector<int64_t> seen(3, 0);
    RunResult result = RunRanks(
        3,
        [&](int rank, comm::Communicator&) {
          pthread_attr_t attr;
          if (pthread_getattr_np(pthread_self(), &attr) != 0) {
            return absl::InternalError("pthread_getattr_np");
          }
          size_t size = 0;
          pthread_attr_getstacksize(&attr, &size);
          pthread_attr_destroy(&attr);
          seen[rank] = static_cast<int64_t>(size);
          return absl::OkStatus();
        },
        options);
    ASSERT_TRUE(result.ok()) << result.status();
    // glibc may hand a new thread a cached stack of an ended thread that is
    // larger than asked for, up to 4x (e.g. an 8 MiB one for 4 MiB); the
    // system default (8 MiB) for 1 MiB would still fail this.
    EXPECT_THAT(seen, ::testing::Each(::testing::AllOf(
                          ::testing::Ge(bytes), ::testing::Lt(4 * bytes))));
  }
}

// More collectives in flight than the lock-free ring has entries: the slots
// beyond it are found through the locked map, and every result is exact.
TEST_P(SimRunTest, ManyCollectivesInFlightAtOnce) {
  constexpr int kInFlight = 600;  // > the ring's 256 entries
  RunResult result = RunRanks(3, [&](int rank, comm::Communicator& comm) {
    std::vector<std::vector<int64_t>> bufs(kInFlight);
    std::vector<std::unique_ptr<comm::Work>> works;
    for (int i = 0; i < kInFlight; ++i) {
      bufs[i].assign(2, rank + i);
      works.push_back(comm.AllReduce(comm::HostView(absl::MakeSpan(bufs[i])),
                                     comm::ReduceOp::kSum));
    }
    // Waited newest first: order of waits is free.
    for (int i = kInFlight - 1; i >= 0; --i) {
      if (absl::Status s = works[i]->Wait(); !s.ok()) return s;
      if (bufs[i][1] != 3 + 3 * i) {
        return absl::InternalError(
            absl::StrCat("collective ", i, ": ", bufs[i][1]));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(SimRunTest, EveryRankRunsOnceWithItsRankAndTheWorldSize) {
  std::vector<std::atomic<int>> seen(5);
  RunResult result = RunRanks(5, [&](int rank, comm::Communicator& comm) {
    if (comm.rank() != rank || comm.size() != 5 || comm.backend() != "sim" ||
        comm.device() != comm::CommDevice::Host()) {
      return absl::InternalError("wrong identity");
    }
    seen[rank].fetch_add(1);
    return absl::OkStatus();
  });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result.ranks.size(), 5u);
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST_P(SimRunTest, StatusPrefersTheCauseOverAbortedRanks) {
  RunResult result;
  result.ranks = {absl::AbortedError("follow-on"), absl::OkStatus(),
                  absl::NotFoundError("root cause")};
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(result.status().message(), "rank 2: root cause");
  result.ranks[2] = absl::OkStatus();
  EXPECT_EQ(result.status().message(), "rank 0: follow-on");
}

TEST_P(SimRunTest, ThreadsAreNamedAfterTheirGpu) {
  if (fibers()) GTEST_SKIP() << "fibers share their workers' threads";
  if (internal::CurrentThreadName().empty()) {
    GTEST_SKIP() << "thread names are not supported here";
  }
  RunResult result = RunRanks(4, [](int rank, comm::Communicator&) {
    const std::string name = internal::CurrentThreadName();
    if (name != absl::StrCat("GPU", rank)) {
      return absl::InternalError(absl::StrCat("thread named ", name));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

// 256 ranks on however few cores: waits block instead of spinning.
TEST_P(SimRunTest, TwoHundredFiftySixRanks) {
  const int n = 256;
  RunResult result = RunRanks(n, [&](int rank, comm::Communicator& comm) {
    std::vector<float> v(1000);
    for (int i = 0; i < 1000; ++i) v[i] = static_cast<float>(rank + i);
    if (absl::Status s = AllReduceSum(comm, v); !s.ok()) return s;
    for (int i = 0; i < 1000; ++i) {
      // sum over ranks of (rank + i) = n(n-1)/2 + n*i, exact in f32.
      const float want = static_cast<float>(n * (n - 1) / 2 + n * i);
      if (v[i] != want) {
        return absl::InternalError(
            absl::StrCat("v[", i, "] = ", v[i], ", expected ", want));
      }
    }
    std::vector<int64_t> b(3, rank == 200 ? 42 : -1);
    if (absl::Status s =
            comm.Broadcast(comm::HostView(absl::MakeSpan(b)), 200)->Wait();
        !s.ok()) {
      return s;
    }
    if (b[2] != 42) return absl::InternalError("broadcast");
    return comm.Barrier();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

// More ranks than cores, many back-to-back collectives: every waiter sleeps
// and is woken once per collective; no wake-up may be lost.
TEST_P(SimRunTest, ManyRanksManySmallCollectives) {
  const int n = 512;
  RunResult result = RunRanks(n, [&](int rank, comm::Communicator& comm) {
    int64_t v = 0;
    for (int i = 0; i < 20; ++i) {
      v = rank + i;
      if (absl::Status s =
              comm.AllReduce(comm::HostView(&v, 1, comm::DType::kI64),
                             comm::ReduceOp::kSum)
                  ->Wait();
          !s.ok()) {
        return s;
      }
      if (v != int64_t{n} * (n - 1) / 2 + int64_t{n} * i) {
        return absl::InternalError(absl::StrCat("iteration ", i, ": ", v));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

// Rounding makes float sums order-dependent; sim must combine in rank order
// at every element (equal to the serial loop) on every run.
TEST_P(SimRunTest, AllReduceIsBitwiseTheSerialLoopOnEveryRun) {
  const int n = 5;
  const int64_t count = 300001;  // several chunks per rank
  std::vector<std::vector<float>> inputs(n, std::vector<float>(count));
  std::mt19937 gen(123);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& in : inputs) {
    for (float& x : in) x = dist(gen) * static_cast<float>(1 << (gen() % 20));
  }
  std::vector<float> serial = inputs[0];
  for (int r = 1; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) serial[i] += inputs[r][i];
  }
  for (int run = 0; run < 3; ++run) {
    std::vector<std::vector<float>> out = inputs;
    RunResult result = RunRanks(n, [&](int rank, comm::Communicator& comm) {
      return AllReduceSum(comm, out[rank]);
    });
    ASSERT_TRUE(result.ok()) << result.status();
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::memcmp(out[r].data(), serial.data(), count * 4), 0)
          << "run " << run << " rank " << r;
    }
  }
}

TEST_P(SimRunTest, BarrierWaitsForEveryRank) {
  const int n = 6;
  std::atomic<int> arrived{0};
  RunResult result = RunRanks(n, [&](int, comm::Communicator& comm) {
    arrived.fetch_add(1);
    if (absl::Status s = comm.Barrier(); !s.ok()) return s;
    if (arrived.load() != n)
      return absl::InternalError("left the barrier early");
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(SimRunTest, MessagesOnOnePairArriveInOrder) {
  RunResult result = RunRanks(2, [](int rank, comm::Communicator& comm) {
    std::vector<std::vector<int32_t>> msgs(4, std::vector<int32_t>(10));
    std::vector<std::unique_ptr<comm::Work>> works;
    for (int m = 0; m < 4; ++m) {
      if (rank == 0) {
        std::fill(msgs[m].begin(), msgs[m].end(), 100 + m);
        works.push_back(comm.Send(comm::HostView(absl::MakeSpan(msgs[m])), 1));
      } else {
        works.push_back(comm.Recv(comm::HostView(absl::MakeSpan(msgs[m])), 0));
      }
    }
    for (int m = 3; m >= 0; --m) {
      if (absl::Status s = works[m]->Wait(); !s.ok()) return s;
    }
    for (int m = 0; m < 4; ++m) {
      if (msgs[m][9] != 100 + m) return absl::InternalError("out of order");
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(SimRunTest, OutputIsCapturedPerRank) {
  OutputCapture capture;
  Options options;
  options.capture = &capture;
  RunResult result = RunRanks(
      3,
      [](int, comm::Communicator& comm) {
        comm::RankPrinter out(comm);
        out.PrintOnRank0("epoch 0 loss 1.5");
        if (absl::Status s = comm.Barrier(); !s.ok()) return s;
        out.PrintOnAllRanks("done\nbye");
        return absl::OkStatus();
      },
      options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(capture.Lines(0),
              ElementsAre("epoch 0 loss 1.5", "[GPU0] done", "[GPU0] bye"));
  EXPECT_THAT(capture.Lines(1), ElementsAre("[GPU1] done", "[GPU1] bye"));
  EXPECT_THAT(capture.Lines(2), ElementsAre("[GPU2] done", "[GPU2] bye"));
  EXPECT_THAT(capture.Lines(3), IsEmpty());
  const std::vector<OutputCapture::Line> all = capture.AllLines();
  ASSERT_EQ(all.size(), 7u);
  // Rank 0's first line was printed before the barrier, so it comes first.
  EXPECT_EQ(all[0].rank, 0);
  EXPECT_EQ(all[0].text, "epoch 0 loss 1.5");
}

TEST_P(SimRunTest, WorkRecordsSayWhatWhichNumberHowBigAndWhen) {
  RunResult result = RunRanks(2, [](int rank, comm::Communicator& comm) {
    std::vector<float> v(1024, 1.0f);
    const absl::Time before = absl::Now();
    auto reduce =
        comm.AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum);
    EXPECT_TRUE(reduce->Wait().ok());
    const comm::WorkRecord& r = reduce->record();
    EXPECT_EQ(r.fp.DebugString(), "#0 AllReduce(f32 x 1024, sum)");
    EXPECT_EQ(r.bytes, 4096);
    EXPECT_GE(r.start, before);
    EXPECT_TRUE(r.completed());
    EXPECT_GE(r.end, r.start);
    EXPECT_LE(r.end, absl::Now());

    std::vector<float> gathered(2 * 1024);
    auto gather = comm.AllGather(comm::HostView(absl::MakeSpan(v)),
                                 comm::HostView(absl::MakeSpan(gathered)));
    EXPECT_TRUE(gather->Wait().ok());
    EXPECT_EQ(gather->record().fp.seq, 1);
    EXPECT_EQ(gather->record().bytes, 2 * 4096);

    // Rejected at issue: seq -1, and the next collective is still #2.
    auto bad = comm.Broadcast(comm::HostView(absl::MakeSpan(v)), /*root=*/7);
    EXPECT_FALSE(bad->Wait().ok());
    EXPECT_EQ(bad->record().fp.seq, -1);
    EXPECT_EQ(bad->record().fp.op, comm::OpKind::kBroadcast);
    EXPECT_TRUE(bad->record().completed());

    std::vector<int64_t> word(3);
    std::unique_ptr<comm::Work> p2p =
        rank == 0 ? comm.Send(comm::HostView(absl::MakeSpan(word)), 1)
                  : comm.Recv(comm::HostView(absl::MakeSpan(word)), 0);
    EXPECT_FALSE(p2p->record().completed() && rank == 1 && !p2p->IsCompleted());
    EXPECT_TRUE(p2p->Wait().ok());
    EXPECT_EQ(p2p->record().fp.DebugString(),
              rank == 0 ? "#0 Send(i64 x 3, to rank 1)"
                        : "#0 Recv(i64 x 3, from rank 0)");
    EXPECT_EQ(p2p->record().bytes, 24);
    EXPECT_TRUE(comm.Barrier().ok());
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(SimRunTest, WorkRecordStaysOpenUntilCompletionIsSeen) {
  Options options;
  options.faults = {
      Fault::DelayAt(/*rank=*/1, /*collective=*/0, absl::Milliseconds(200))};
  RunResult result = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) {
        std::vector<float> v(8, 1.0f);
        auto work = comm.AllReduce(comm::HostView(absl::MakeSpan(v)),
                                   comm::ReduceOp::kSum);
        if (rank == 0) {
          EXPECT_FALSE(work->IsCompleted());
          EXPECT_FALSE(work->record().completed());
          EXPECT_THAT(work->record().DebugString(), HasSubstr("in flight for"));
        }
        EXPECT_TRUE(work->Wait().ok());
        EXPECT_TRUE(work->record().completed());
        if (rank == 0) {
          EXPECT_GE(work->record().end - work->record().start,
                    absl::Milliseconds(150));
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(SimRunTest, EmptyBuffersStillSynchronise) {
  RunResult result = RunRanks(3, [](int, comm::Communicator& comm) {
    for (int i = 0; i < 3; ++i) {
      if (absl::Status s =
              comm.AllReduce(comm::HostView(nullptr, 0, comm::DType::kF16),
                             comm::ReduceOp::kMax)
                  ->Wait();
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TANDEM_SIM_TEST_BOTH_MODES(SimRunTest);

}  // namespace
}  // namespace tandem::sim
