// The network clock (sim/clock.h): exact simulated times with measured
// compute switched off (compute_scale = 0), so nothing depends on timing.
#include "sim/clock.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/math_tally.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "gtest/gtest.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/topology.h"
#include "sim/options.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

constexpr int64_t kCount = 1 << 18;  // 1 MiB of f32

cost::Topology Machine(int world_size) {
  cost::Topology t = *cost::MakeTopology("h100-nvlink");
  t.gpus_per_node = world_size;
  return t;
}

using ClockTest = testing::ModeTest;

Options ClockOn(int world_size) {
  Options o;
  o.clock = ClockOptions{Machine(world_size), cost::Algorithm::kRing,
                         /*compute_scale=*/0};
  return o;
}

double AllReduceSeconds(int world_size, int64_t count) {
  return *cost::CollectiveSeconds(Machine(world_size), comm::OpKind::kAllReduce,
                                  count * 4, cost::Algorithm::kRing);
}

absl::Status AllReduce(comm::Communicator& comm, std::vector<float>& v) {
  return comm
      .AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum)
      ->Wait();
}

TEST_P(ClockTest, OffByDefault) {
  RunResult r = RunRanks(2, [](int, comm::Communicator& comm) -> absl::Status {
    EXPECT_FALSE(ReadClock(comm).has_value());
    AdvanceClock(comm, 1.0);  // a no-op
    std::vector<float> v(16, 1.0f);
    return AllReduce(comm, v);
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r.clocks.empty());
}

TEST_P(ClockTest, OneAllReduceTakesItsModelledTime) {
  RunResult r = RunRanks(
      4,
      [](int, comm::Communicator& comm) -> absl::Status {
        std::vector<float> v(kCount, 1.0f);
        return AllReduce(comm, v);
      },
      ClockOn(4));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r.clocks.size(), 4u);
  const double d = AllReduceSeconds(4, kCount);
  for (const ClockReading& c : r.clocks) {
    EXPECT_DOUBLE_EQ(c.now_s, d);
    EXPECT_DOUBLE_EQ(c.exposed_comm_s, d);
    EXPECT_DOUBLE_EQ(c.comm_s, d);
    EXPECT_EQ(c.compute_s, 0);
    EXPECT_EQ(c.operations, 1);
  }
}

TEST_P(ClockTest, CollectivesQueueOnOneStream) {
  // Two all-reduces issued back to back run one after the other.
  RunResult r = RunRanks(
      2,
      [](int, comm::Communicator& comm) -> absl::Status {
        std::vector<float> a(kCount, 1.0f), b(kCount, 2.0f);
        auto wa = comm.AllReduce(comm::HostView(absl::MakeSpan(a)),
                                 comm::ReduceOp::kSum);
        auto wb = comm.AllReduce(comm::HostView(absl::MakeSpan(b)),
                                 comm::ReduceOp::kSum);
        // Waiting the second first still ends at both durations.
        if (absl::Status s = wb->Wait(); !s.ok()) return s;
        return wa->Wait();
      },
      ClockOn(2));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const ClockReading& c : r.clocks) {
    EXPECT_DOUBLE_EQ(c.now_s, 2 * AllReduceSeconds(2, kCount));
    EXPECT_EQ(c.operations, 2);
  }
}

TEST_P(ClockTest, ACollectiveStartsWhenTheLastRankIssuesIt) {
  // Rank 1 computes 3 ms first; rank 0 waits for it.
  RunResult r = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        if (rank == 1) AdvanceClock(comm, 3e-3);
        std::vector<float> v(kCount, 1.0f);
        return AllReduce(comm, v);
      },
      ClockOn(2));
  ASSERT_TRUE(r.ok()) << r.status();
  const double d = AllReduceSeconds(2, kCount);
  EXPECT_DOUBLE_EQ(r.clocks[0].now_s, 3e-3 + d);
  EXPECT_DOUBLE_EQ(r.clocks[1].now_s, 3e-3 + d);
  EXPECT_DOUBLE_EQ(r.clocks[0].exposed_comm_s, 3e-3 + d);
  // (3 ms + d) - 3 ms: equal up to rounding of the sum.
  EXPECT_NEAR(r.clocks[1].exposed_comm_s, d, 1e-15);
  EXPECT_DOUBLE_EQ(r.clocks[1].compute_s, 3e-3);
}

TEST_P(ClockTest, CommunicationUnderComputeIsHidden) {
  // Issue, compute 1 s (far longer than the all-reduce), then wait: nothing
  // is exposed. Wait first, then compute: all of it is.
  for (bool overlap : {true, false}) {
    RunResult r = RunRanks(
        2,
        [overlap](int, comm::Communicator& comm) -> absl::Status {
          std::vector<float> v(kCount, 1.0f);
          auto w = comm.AllReduce(comm::HostView(absl::MakeSpan(v)),
                                  comm::ReduceOp::kSum);
          if (overlap) AdvanceClock(comm, 1.0);
          if (absl::Status s = w->Wait(); !s.ok()) return s;
          if (!overlap) AdvanceClock(comm, 1.0);
          std::optional<ClockReading> now = ReadClock(comm);
          EXPECT_TRUE(now.has_value());
          return absl::OkStatus();
        },
        ClockOn(2));
    ASSERT_TRUE(r.ok()) << r.status();
    const double d = AllReduceSeconds(2, kCount);
    for (const ClockReading& c : r.clocks) {
      EXPECT_DOUBLE_EQ(c.now_s, overlap ? 1.0 : 1.0 + d) << overlap;
      EXPECT_DOUBLE_EQ(c.exposed_comm_s, overlap ? 0.0 : d) << overlap;
    }
  }
}

TEST_P(ClockTest, SendRecvTakeOneHop) {
  RunResult r = RunRanks(
      2,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        std::vector<float> v(kCount, 1.0f);
        auto view = comm::HostView(absl::MakeSpan(v));
        return (rank == 0 ? comm.Send(view, 1) : comm.Recv(view, 0))->Wait();
      },
      ClockOn(2));
  ASSERT_TRUE(r.ok()) << r.status();
  const double d = cost::PointToPointSeconds(Machine(2), 0, 1, kCount * 4);
  EXPECT_DOUBLE_EQ(r.clocks[0].now_s, d);
  EXPECT_DOUBLE_EQ(r.clocks[1].now_s, d);
}

// 2 nodes of 2 GPUs: ranks 0, 1 on node 0 and 2, 3 on node 1.
cost::Topology TwoNodesOfTwo() {
  cost::Topology t = *cost::MakeTopology("h100-nvlink", 2);
  t.gpus_per_node = 2;
  return t;
}

// What Split's all-gather of (color, key) costs on the 4-rank machine.
double SplitSeconds(const cost::Topology& t) {
  return *cost::CollectiveSeconds(t, comm::OpKind::kAllGather,
                                  /*bytes=*/2 * 8 * 4, cost::Algorithm::kRing);
}

TEST_P(ClockTest, ASubCommunicatorChargesTheRanksClockForItsOwnGpus) {
  // Replicas one per node ({0, 2} and {1, 3}), as a pipeline's data-parallel
  // dimension: their all-reduce crosses nodes on one NIC each, and the
  // rank's one clock sees it.
  const cost::Topology t = TwoNodesOfTwo();
  Options o;
  o.clock = ClockOptions{t, cost::Algorithm::kRing, /*compute_scale=*/0};
  RunResult r = RunRanks(
      4,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        absl::StatusOr<std::unique_ptr<comm::Communicator>> sub =
            comm.Split(rank % 2, rank);
        if (!sub.ok()) return sub.status();
        std::vector<float> v(kCount, 1.0f);
        return AllReduce(**sub, v);
      },
      o);
  ASSERT_TRUE(r.ok()) << r.status();
  const double across = *cost::CollectiveSeconds(
      *cost::SubTopology(t, {0, 2}), comm::OpKind::kAllReduce, kCount * 4,
      cost::Algorithm::kRing);
  // Not the cost of an all-reduce over the whole machine.
  ASSERT_NE(across,
            *cost::CollectiveSeconds(t, comm::OpKind::kAllReduce, kCount * 4,
                                     cost::Algorithm::kRing));
  for (const ClockReading& c : r.clocks) {
    EXPECT_DOUBLE_EQ(c.now_s, SplitSeconds(t) + across);
    EXPECT_DOUBLE_EQ(c.comm_s, SplitSeconds(t) + across);
    EXPECT_EQ(c.operations, 2);
  }
}

TEST_P(ClockTest, SendRecvOnASubCommunicatorCostTheirGpusHop) {
  // Keys reorder the members: sub-ranks 0, 1, 2, 3 are ranks 0, 2, 1, 3, so
  // sub-rank 0 -> 1 is rank 0 -> 2, across the nodes.
  const cost::Topology t = TwoNodesOfTwo();
  Options o;
  o.clock = ClockOptions{t, cost::Algorithm::kRing, /*compute_scale=*/0};
  RunResult r = RunRanks(
      4,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        const int key = rank == 1 ? 2 : rank == 2 ? 1 : rank;
        absl::StatusOr<std::unique_ptr<comm::Communicator>> sub =
            comm.Split(0, key);
        if (!sub.ok()) return sub.status();
        std::vector<float> v(kCount, 1.0f);
        auto view = comm::HostView(absl::MakeSpan(v));
        if ((*sub)->rank() == 0) return (*sub)->Send(view, 1)->Wait();
        if ((*sub)->rank() == 1) return (*sub)->Recv(view, 0)->Wait();
        return absl::OkStatus();
      },
      o);
  ASSERT_TRUE(r.ok()) << r.status();
  const double hop = cost::PointToPointSeconds(t, 0, 2, kCount * 4);
  ASSERT_NE(hop, cost::PointToPointSeconds(t, 0, 1, kCount * 4));
  EXPECT_DOUBLE_EQ(r.clocks[0].now_s, SplitSeconds(t) + hop);
  EXPECT_DOUBLE_EQ(r.clocks[2].now_s, SplitSeconds(t) + hop);
  EXPECT_DOUBLE_EQ(r.clocks[1].now_s, SplitSeconds(t));
  EXPECT_DOUBLE_EQ(r.clocks[3].now_s, SplitSeconds(t));
}

TEST_P(ClockTest, MeasuredComputeIsCharged) {
  Options o = ClockOn(2);
  o.clock->compute_scale = 1;
  RunResult r = RunRanks(
      2,
      [](int, comm::Communicator& comm) -> absl::Status {
        // Some CPU work on this thread (its amount, not its speed, matters).
        volatile double x = 0;
        for (int i = 0; i < 2000000; ++i) x = x + 1e-9 * i;
        std::vector<float> v(16, 1.0f);
        return AllReduce(comm, v);
      },
      o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const ClockReading& c : r.clocks) {
    EXPECT_GT(c.compute_s, 0);
    EXPECT_DOUBLE_EQ(c.now_s, c.compute_s + c.exposed_comm_s);
  }
}

// Burns about `seconds` of this thread's CPU time, inside a dense math
// kernel's tally scope or not.
void Burn(double seconds, bool as_math_kernel) {
  std::optional<base::ScopedMathKernel> kernel;
  if (as_math_kernel) kernel.emplace();
  const double end = base::ThreadCpuSeconds() + seconds;
  volatile double x = 0;
  while (base::ThreadCpuSeconds() < end) x = x + 1;
}

// Rank 0 computes in "math kernels", rank 1 outside them; returns their
// charged compute with the given scales.
std::vector<double> ChargedCompute(RankExecution mode, double compute_scale,
                                   double memory_scale) {
  Options o = ClockOn(2);
  o.ranks = mode;
  // Fibers: both ranks on one worker, so each burns while the other's CPU
  // clock must stand still.
  o.fiber_workers = 1;
  o.clock->compute_scale = compute_scale;
  o.clock->memory_scale = memory_scale;
  RunResult r = sim::Run(
      2,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        Burn(0.02, /*as_math_kernel=*/rank == 0);
        std::vector<float> v(16, 1.0f);
        return AllReduce(comm, v);
      },
      o);
  EXPECT_TRUE(r.ok()) << r.status();
  return {r.clocks[0].compute_s, r.clocks[1].compute_s};
}

TEST_P(ClockTest, MemoryScaleChargesWorkOutsideMathKernels) {
  // Kernel time scaled by compute_scale, the rest by memory_scale. The
  // bounds allow the few microseconds of bookkeeping outside the burn.
  std::vector<double> c = ChargedCompute(mode(), /*compute=*/0, /*memory=*/1);
  EXPECT_LT(c[0], 0.005);
  EXPECT_GE(c[1], 0.02);
  c = ChargedCompute(mode(), /*compute=*/1, /*memory=*/0);
  EXPECT_GE(c[0], 0.02);
  EXPECT_LT(c[1], 0.005);
  // Without a memory term both kinds of work are compute.
  c = ChargedCompute(mode(), /*compute=*/1, /*memory=*/-1);
  EXPECT_GE(c[0], 0.02);
  EXPECT_GE(c[1], 0.02);
  EXPECT_FALSE(base::MathTallyOn());  // the run's tally ended with it
}

TEST_P(ClockTest, TopologyMustMatchTheWorldSize) {
  RunResult r = RunRanks(
      3, [](int, comm::Communicator&) { return absl::OkStatus(); }, ClockOn(2));
  EXPECT_EQ(r.launch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.launch.message().find("has 2 GPUs but the run has 3 ranks"),
            std::string::npos)
      << r.launch;
  Options o = ClockOn(2);
  o.clock->compute_scale = -1;
  EXPECT_FALSE(
      RunRanks(
          2, [](int, comm::Communicator&) { return absl::OkStatus(); }, o)
          .launch.ok());
  o = ClockOn(2);
  o.clock->memory_scale = std::numeric_limits<double>::quiet_NaN();
  RunResult nan = RunRanks(
      2, [](int, comm::Communicator&) { return absl::OkStatus(); }, o);
  EXPECT_EQ(nan.launch.code(), absl::StatusCode::kInvalidArgument);
}

TANDEM_SIM_TEST_BOTH_MODES(ClockTest);

}  // namespace
}  // namespace tandem::sim
