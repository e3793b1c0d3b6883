// How Works make progress: out-of-order waits, operations completed by the
// ranks that wait while others are busy, polling, Wait timeouts, destroying
// Works, and the checks on buffers.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
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

using ProgressTest = testing::ModeTest;

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

TEST_P(ProgressTest, ARankThatWaitsFinishesTheWorkOfABusyRank) {
  // Rank 1 issues the all-reduce and then stays busy until rank 0's Wait has
  // returned: rank 0 must have moved all the data, rank 1's included.
  testing::Latch rank0_done(1);
  RunResult result = RunRanks(2, [&](int rank, comm::Communicator& comm) {
    std::vector<float> v(1 << 20, static_cast<float>(rank + 1));
    std::unique_ptr<comm::Work> work =
        comm.AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum);
    if (rank == 0) {
      absl::Status s = work->Wait();
      rank0_done.CountDown();
      if (!s.ok()) return s;
    } else {
      rank0_done.Wait();
      if (!work->IsCompleted()) {
        return absl::InternalError("rank 1's part was not done by rank 0");
      }
    }
    return Expect(v.front() == 3.0f && v.back() == 3.0f, "wrong sum");
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, PollingIsCompletedAloneMakesProgress) {
  RunResult result = RunRanks(3, [](int rank, comm::Communicator& comm) {
    std::vector<int64_t> v(100000, rank);
    std::unique_ptr<comm::Work> work =
        comm.AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kMax);
    while (!work->IsCompleted()) {
    }
    if (absl::Status s = work->Wait(absl::ZeroDuration()); !s.ok()) return s;
    return Expect(v[0] == 2 && v[99999] == 2, "wrong max");
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, WaitTimeoutLeavesTheWorkInFlight) {
  testing::Latch first_wait_timed_out(1);
  RunResult result = RunRanks(2, [&](int rank, comm::Communicator& comm) {
    std::vector<float> v(8, 1.0f);
    if (rank == 1) first_wait_timed_out.Wait();
    std::unique_ptr<comm::Work> work =
        comm.AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum);
    if (rank == 0) {
      absl::Status s = work->Wait(absl::Milliseconds(1));
      const bool completed_early = work->IsCompleted();
      first_wait_timed_out.CountDown();
      if (s.code() != absl::StatusCode::kDeadlineExceeded ||
          !absl::StrContains(s.message(),
                             "rank 0: #0 AllReduce(f32 x 8, sum) has not "
                             "completed after 1ms (the Wait timeout; the "
                             "operation is still in flight)") ||
          !absl::StrContains(s.message(), "not yet issued by rank 1")) {
        return absl::InternalError(absl::StrCat("first wait: ", s.ToString()));
      }
      if (completed_early) return absl::InternalError("completed early");
    }
    if (absl::Status s = work->Wait(); !s.ok()) return s;
    return Expect(v[7] == 2.0f, "wrong sum");
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, ManyOutstandingWaitedInReverse) {
  // DDP's pattern: one all-reduce per bucket during backward, all waited at
  // the end of the step, here in the opposite order on odd ranks.
  RunResult result = RunRanks(4, [](int rank, comm::Communicator& comm) {
    const int buckets = 12;
    std::vector<std::vector<float>> grads;
    std::vector<std::unique_ptr<comm::Work>> works;
    for (int b = 0; b < buckets; ++b) {
      grads.emplace_back(1000 + 5000 * b, static_cast<float>(rank + b));
      works.push_back(comm.AllReduce(comm::HostView(absl::MakeSpan(grads[b])),
                                     comm::ReduceOp::kAvg));
    }
    for (int i = 0; i < buckets; ++i) {
      const int b = rank % 2 ? buckets - 1 - i : i;
      if (absl::Status s = works[b]->Wait(); !s.ok()) return s;
    }
    for (int b = 0; b < buckets; ++b) {
      // avg over ranks of (rank + b) = 1.5 + b
      if (grads[b].back() != 1.5f + b) {
        return absl::InternalError(absl::StrCat("bucket ", b));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, DestroyingAnUnwaitedWorkCompletesIt) {
  RunResult result = RunRanks(2, [](int rank, comm::Communicator& comm) {
    std::vector<float> v(1000, 2.0f);
    {
      std::unique_ptr<comm::Work> work = comm.AllReduce(
          comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kProd);
      if (rank == 1) {
        if (absl::Status s = work->Wait(); !s.ok()) return s;
      }
    }  // rank 0 drops its Work without waiting: the destructor waits.
    return Expect(v[999] == 4.0f, "wrong product");
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, OverlappingOutstandingBuffersAreRejected) {
  RunResult result = RunRanks(2, [](int rank, comm::Communicator& comm) {
    std::vector<float> v(100, 1.0f);
    auto all = comm::HostView(absl::MakeSpan(v));
    std::unique_ptr<comm::Work> first =
        comm.AllReduce(all, comm::ReduceOp::kSum);
    // Overlaps the in-flight all-reduce's buffer: rejected at enqueue.
    std::unique_ptr<comm::Work> second =
        comm.Broadcast(comm::HostView(v.data() + 50, 10, comm::DType::kF32), 0);
    if (!second->IsCompleted()) return absl::InternalError("second in flight");
    absl::Status s = second->Wait();
    if (s.code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(s.message(),
                           absl::StrCat("Broadcast on rank ", rank,
                                        ": its buffers overlap those of #0 "
                                        "AllReduce(f32 x 100, sum), which is "
                                        "still in flight"))) {
      return absl::InternalError(s.ToString());
    }
    if (absl::Status w = first->Wait(); !w.ok()) return w;
    // Once the first completed, the same buffer is free again; and reading
    // one buffer in two operations at once is fine.
    if (absl::Status w = comm.AllReduce(all, comm::ReduceOp::kSum)->Wait();
        !w.ok()) {
      return w;
    }
    std::vector<float> in(10, 7.0f), out1(10), out2(10);
    std::unique_ptr<comm::Work> a, b;
    if (rank == 0) {
      a = comm.Send(comm::HostView(absl::MakeSpan(in)), 1);
      b = comm.Send(comm::HostView(absl::MakeSpan(in)), 1);
    } else {
      a = comm.Recv(comm::HostView(absl::MakeSpan(out1)), 0);
      b = comm.Recv(comm::HostView(absl::MakeSpan(out2)), 0);
    }
    if (absl::Status w = a->Wait(); !w.ok()) return w;
    if (absl::Status w = b->Wait(); !w.ok()) return w;
    return Expect(v[0] == 4.0f && (rank == 0 || out2[9] == 7.0f), "values");
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, DeviceMemoryIsAnArgumentError) {
  RunResult result = RunRanks(2, [](int rank, comm::Communicator& comm) {
    std::vector<float> v(4);
    comm::BufferView device{v.data(), 4, comm::DType::kF32,
                            comm::MemorySpace::kCuda, rank};
    absl::Status s = comm.AllReduce(device, comm::ReduceOp::kSum)->Wait();
    if (s.code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(s.message(),
                           absl::StrCat("AllReduce on rank ", rank,
                                        ": the sim backend moves host memory "
                                        "only; found buf in f32[4] cuda:",
                                        rank))) {
      return absl::InternalError(s.ToString());
    }
    return comm.Barrier();  // still in step
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_P(ProgressTest, WorldOfOneCompletesAtOnce) {
  RunResult result = RunRanks(1, [](int, comm::Communicator& comm) {
    std::vector<double> v(10, 3.0), out(10);
    if (absl::Status s = comm.AllReduce(comm::HostView(absl::MakeSpan(v)),
                                        comm::ReduceOp::kAvg)
                             ->Wait();
        !s.ok()) {
      return s;
    }
    if (absl::Status s = comm.AllGather(comm::HostView(absl::MakeSpan(v)),
                                        comm::HostView(absl::MakeSpan(out)))
                             ->Wait();
        !s.ok()) {
      return s;
    }
    return Expect(v[9] == 3.0 && out[9] == 3.0, "values");
  });
  EXPECT_TRUE(result.ok()) << result.status();
}

TANDEM_SIM_TEST_BOTH_MODES(ProgressTest);

}  // namespace
}  // namespace tandem::sim
