// The small all-reduce lanes (sim/fast_lane.h): the same bits as the Slot
// path, any number in flight, progress without the issuer's Wait, and the
// checks (mismatch against the Slot path, the Wait timeout).
#include "sim/fast_lane.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/options.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

using internal::FastLanes;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

TEST(FastLanesTest, EligibleIsSmallAllReducesOnThreadsOfAtMostEightRanks) {
  comm::Fingerprint fp =
      comm::MakeFingerprint(comm::OpKind::kAllReduce, comm::DType::kF32, 1024);
  fp.reduce_op = comm::ReduceOp::kSum;
  EXPECT_TRUE(FastLanes::Eligible(fp));  // 4 KiB
  fp.count = 1025;
  EXPECT_FALSE(FastLanes::Eligible(fp));
  fp.dtype = comm::DType::kBF16;  // 2050 bytes
  EXPECT_TRUE(FastLanes::Eligible(fp));
  comm::Fingerprint b =
      comm::MakeFingerprint(comm::OpKind::kBroadcast, comm::DType::kF32, 2);
  b.root = 0;
  EXPECT_FALSE(FastLanes::Eligible(b));

  Options threads;
  EXPECT_TRUE(FastLanes::Enabled(2, threads));
  EXPECT_TRUE(FastLanes::Enabled(8, threads));
  EXPECT_FALSE(FastLanes::Enabled(9, threads));
  EXPECT_FALSE(FastLanes::Enabled(1, threads));
  Options fibers;
  fibers.ranks = RankExecution::kFibers;
  EXPECT_FALSE(FastLanes::Enabled(2, fibers));
}

// Rank r's contribution: values whose f32 sum depends on the order of the
// additions, so a reordered reduction changes bits.
std::vector<float> Contribution(int rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const float big = (rank % 2 == 0 ? 1e8f : -1e8f) * (1 + i % 3);
    v[i] = rank == 0 ? big : big + 0.37f * rank + 0.011f * i;
  }
  return v;
}

struct Case {
  comm::DType dtype;
  comm::ReduceOp op;
};

// Runs one all-reduce of `count` elements on `world` ranks; returns each
// rank's output bytes.
std::vector<std::vector<unsigned char>> RunOne(int world, RankExecution mode,
                                               Case c, int64_t count) {
  std::vector<std::vector<unsigned char>> out(world);
  Options options;
  options.ranks = mode;
  RunResult result = sim::Run(
      world,
      [&](int rank, comm::Communicator& comm) {
        const std::vector<float> f = Contribution(rank, count);
        const int64_t size = comm::DTypeSize(c.dtype);
        std::vector<unsigned char> buf(count * size);
        for (int64_t i = 0; i < count; ++i) {
          if (c.dtype == comm::DType::kF32) {
            std::memcpy(&buf[i * size], &f[i], 4);
          } else if (c.dtype == comm::DType::kF64) {
            const double d = f[i] * 1e9;
            std::memcpy(&buf[i * size], &d, 8);
          } else {  // i32
            const int32_t x = static_cast<int32_t>(f[i] * 1e-3f);
            std::memcpy(&buf[i * size], &x, 4);
          }
        }
        absl::Status s =
            comm.AllReduce(comm::BufferView{buf.data(), count, c.dtype}, c.op)
                ->Wait();
        out[rank] = buf;
        return s;
      },
      options);
  for (int r = 0; r < world; ++r) EXPECT_TRUE(result.ranks[r].ok()) << r;
  return out;
}

// Threads take the lanes, fibers the Slot path: bit for bit the same.
TEST(FastLanesTest, SameBitsAsTheSlotPath) {
  const Case cases[] = {{comm::DType::kF32, comm::ReduceOp::kSum},
                        {comm::DType::kF32, comm::ReduceOp::kAvg},
                        {comm::DType::kF32, comm::ReduceOp::kMax},
                        {comm::DType::kF64, comm::ReduceOp::kSum},
                        {comm::DType::kI32, comm::ReduceOp::kSum}};
  for (int world : {2, 3, 4}) {
    for (const Case& c : cases) {
      for (int64_t count :
           {int64_t{1}, int64_t{2}, int64_t{37}, int64_t{1024}}) {
        if (count * comm::DTypeSize(c.dtype) > FastLanes::kMaxBytes) continue;
        SCOPED_TRACE(absl::StrCat("world ", world, " dtype ",
                                  comm::DTypeName(c.dtype), " count ", count));
        const auto lanes = RunOne(world, RankExecution::kThreads, c, count);
        const auto slots = RunOne(world, RankExecution::kFibers, c, count);
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(lanes[r], slots[r]) << "rank " << r;
          EXPECT_EQ(lanes[r], lanes[0]) << "rank " << r;
        }
      }
    }
  }
}

// More collectives in flight than a lane starts with nodes, waited last
// first: waiting for the last completes the earlier ones (in issue order).
TEST(FastLanesTest, ManyInFlightWaitedInReverse) {
  constexpr int kOps = 40;
  for (int world : {2, 3}) {
    RunResult result = sim::Run(world, [&](int rank, comm::Communicator& comm) {
      std::vector<std::vector<float>> bufs(kOps);
      std::vector<std::unique_ptr<comm::Work>> works;
      for (int k = 0; k < kOps; ++k) {
        bufs[k] = {float(rank), float(k), float(rank * k)};
        works.push_back(comm.AllReduce(comm::HostView(absl::MakeSpan(bufs[k])),
                                       comm::ReduceOp::kSum));
      }
      for (int k = kOps - 1; k >= 0; --k) {
        if (absl::Status s = works[k]->Wait(); !s.ok()) return s;
        if (k == kOps - 1 && !works[0]->IsCompleted()) {
          return absl::InternalError("#0 not complete after #39's Wait");
        }
      }
      const float ranks = world * (world - 1) / 2.0f;
      for (int k = 0; k < kOps; ++k) {
        if (bufs[k][0] != ranks || bufs[k][1] != float(world * k) ||
            bufs[k][2] != ranks * k) {
          return absl::InternalError(absl::StrCat("wrong sum at #", k));
        }
      }
      return absl::OkStatus();
    });
    for (int r = 0; r < world; ++r)
      EXPECT_TRUE(result.ranks[r].ok()) << result.ranks[r];
  }
}

// Nodes are reused once every peer has moved past them (sim/fast_lane.h):
// thousands of operations, paced differently on each rank (rank r keeps up
// to 1 + (k + r) % 12 in flight before waiting for them all), each with
// values of its own, so a node rewritten while a peer still reads it shows
// up as a wrong sum here and as a race under TSan.
TEST(FastLanesTest, NodesReusedUnderUnevenPacing) {
  constexpr int kOps = 3000;
  for (int world : {2, 3, 8}) {
    RunResult result = sim::Run(world, [&](int rank, comm::Communicator& comm) {
      std::vector<std::vector<float>> bufs(kOps);
      std::vector<std::unique_ptr<comm::Work>> works;
      size_t waited = 0;
      for (int k = 0; k < kOps; ++k) {
        bufs[k] = {float(rank), float(k), float(rank * (k % 100))};
        works.push_back(comm.AllReduce(comm::HostView(absl::MakeSpan(bufs[k])),
                                       comm::ReduceOp::kSum));
        if (works.size() - waited >= size_t(1 + (k + rank) % 12) ||
            k == kOps - 1) {
          for (; waited < works.size(); ++waited) {
            if (absl::Status s = works[waited]->Wait(); !s.ok()) return s;
          }
        }
      }
      const float ranks = world * (world - 1) / 2.0f;
      for (int k = 0; k < kOps; ++k) {
        if (bufs[k][0] != ranks || bufs[k][1] != float(world * k) ||
            bufs[k][2] != ranks * (k % 100)) {
          return absl::InternalError(absl::StrCat("wrong sum at #", k));
        }
      }
      return absl::OkStatus();
    });
    for (int r = 0; r < world; ++r)
      EXPECT_TRUE(result.ranks[r].ok())
          << "world " << world << ": " << result.ranks[r];
  }
}

// Rank 1 issues its all-reduce and waits for rank 0's message, which rank 0
// sends only once its all-reduce is complete: rank 0 completes from rank
// 1's posted contribution, without rank 1's Wait.
TEST(FastLanesTest, PeersCompleteWithoutTheIssuersWait) {
  RunResult result = sim::Run(2, [](int rank, comm::Communicator& comm) {
    std::vector<float> buf = {float(rank + 1), 10.0f};
    std::vector<float> msg = {0};
    auto view = comm::HostView(absl::MakeSpan(buf));
    auto msg_view = comm::HostView(absl::MakeSpan(msg));
    if (rank == 0) {
      if (absl::Status s = comm.AllReduce(view, comm::ReduceOp::kSum)->Wait();
          !s.ok()) {
        return s;
      }
      msg[0] = buf[0];
      if (absl::Status s = comm.Send(msg_view, 1)->Wait(); !s.ok()) return s;
    } else {
      std::unique_ptr<comm::Work> work =
          comm.AllReduce(view, comm::ReduceOp::kSum);
      if (absl::Status s = comm.Recv(msg_view, 0)->Wait(); !s.ok()) return s;
      if (absl::Status s = work->Wait(); !s.ok()) return s;
      if (msg[0] != 3.0f) return absl::InternalError("rank 0's sum is wrong");
    }
    if (buf[0] != 3.0f || buf[1] != 20.0f) {
      return absl::InternalError("wrong sum");
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.ranks[0].ok()) << result.ranks[0];
  EXPECT_TRUE(result.ranks[1].ok()) << result.ranks[1];
}

class FastLanesCheckTest : public testing::WatchdogTest {};

// Collective #1: a 2-float all-reduce (lanes) on one rank, a 2048-float one
// (8 KiB: the Slot path) on the other. Whichever way round, both ranks fail
// at once (the timeout is an hour) naming both collectives.
TEST_F(FastLanesCheckTest, MismatchWithTheSlotPathFailsBothRanks) {
  for (int small_rank : {0, 1}) {
    Options options;
    options.timeout = absl::Hours(1);
    RunResult result = sim::Run(
        2,
        [&](int rank, comm::Communicator& comm) {
          std::vector<float> buf(2048, 1.0f);
          if (absl::Status s = comm.AllReduce(comm::HostView(buf.data(), 4,
                                                             comm::DType::kF32),
                                              comm::ReduceOp::kSum)
                                   ->Wait();
              !s.ok()) {
            return s;
          }
          const int64_t n = rank == small_rank ? 2 : 2048;
          return comm
              .AllReduce(comm::HostView(buf.data(), n, comm::DType::kF32),
                         comm::ReduceOp::kSum)
              ->Wait();
        },
        options);
    const std::string lo = small_rank == 0 ? "2" : "2048";
    const std::string hi = small_rank == 0 ? "2048" : "2";
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kFailedPrecondition)
          << result.ranks[r];
      EXPECT_THAT(Msg(result.ranks[r]),
                  HasSubstr(absl::StrCat(
                      "collective mismatch at collective #1: rank 0 issued #1 "
                      "AllReduce(f32 x ",
                      lo, ", sum) but rank 1 issued #1 AllReduce(f32 x ", hi,
                      ", sum)")));
    }
  }
}

// A Wait timeout leaves the collective in flight; a later Wait completes it.
TEST_F(FastLanesCheckTest, WaitTimeoutLeavesItInFlight) {
  testing::Latch timed_out(1);
  RunResult result = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    std::vector<float> buf = {float(rank + 1)};
    auto view = comm::HostView(absl::MakeSpan(buf));
    if (rank == 1) timed_out.Wait();
    std::unique_ptr<comm::Work> work =
        comm.AllReduce(view, comm::ReduceOp::kSum);
    if (rank == 0) {
      absl::Status s = work->Wait(absl::Milliseconds(10));
      timed_out.CountDown();
      if (s.code() != absl::StatusCode::kDeadlineExceeded ||
          Msg(s).find("still in flight): not yet issued by rank 1 (it has "
                      "issued 0 collectives)") == std::string::npos) {
        return absl::InternalError(absl::StrCat("first Wait: ", s.ToString()));
      }
    }
    if (absl::Status s = work->Wait(); !s.ok()) return s;
    return buf[0] == 3.0f ? absl::OkStatus() : absl::InternalError("wrong sum");
  });
  EXPECT_TRUE(result.ranks[0].ok()) << result.ranks[0];
  EXPECT_TRUE(result.ranks[1].ok()) << result.ranks[1];
}

}  // namespace
}  // namespace tandem::sim
