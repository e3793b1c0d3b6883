// Ranks as fibers (sim::Options::ranks = kFibers) against ranks as threads:
// rank-scoped thread-local state (trace rank, autocast, grad mode) follows
// each fiber across switches, and results are the same bit for bit.
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/trace/trace.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"

namespace tandem {
namespace {

// Eight ranks on ONE worker, so every barrier switches between all of
// them: each keeps its own trace rank, autocast region and grad mode.
TEST(FiberModesTest, RankScopedThreadLocalsFollowEachFiber) {
  sim::Options options;
  options.ranks = sim::RankExecution::kFibers;
  options.fiber_workers = 1;
  sim::RunResult result = sim::Run(
      8,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        if (trace::ThreadRank() != -1 ||
            amp::IsAutocastEnabled(DeviceType::kCPU) || !IsGradEnabled()) {
          return absl::InternalError("a fiber did not start clean");
        }
        trace::ScopedThreadRank trace_rank(rank);
        const bool even = rank % 2 == 0;
        amp::Autocast autocast(DeviceType::kCPU, DType::kBF16,
                               /*enabled=*/even);
        std::optional<NoGradGuard> no_grad;
        if (!even) no_grad.emplace();
        for (int i = 0; i < 5; ++i) {
          if (absl::Status s = comm.Barrier(); !s.ok()) return s;
          if (trace::ThreadRank() != rank) {
            return absl::InternalError(absl::StrCat(
                "trace rank ", trace::ThreadRank(), " after a switch"));
          }
          if (amp::IsAutocastEnabled(DeviceType::kCPU) != even) {
            return absl::InternalError("autocast state of another rank");
          }
          if (IsGradEnabled() != even) {
            return absl::InternalError("grad mode of another rank");
          }
        }
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
  // The worker thread's own state is untouched (this thread ran no fiber,
  // and the fibers restored theirs on every switch out).
  EXPECT_EQ(trace::ThreadRank(), -1);
  EXPECT_TRUE(IsGradEnabled());
}

// Random f32 all-reduce (sum), reduce-scatter and all-gather over 13 ranks:
// every rank's buffers, as bits.
std::vector<std::vector<uint32_t>> Results(sim::RankExecution mode) {
  constexpr int kRanks = 13;
  constexpr int64_t kCount = 3001;
  std::vector<std::vector<uint32_t>> bits(kRanks);
  sim::Options options;
  options.ranks = mode;
  sim::RunResult result = sim::Run(
      kRanks,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        std::mt19937 gen(1234 + rank);
        std::normal_distribution<float> dist;
        std::vector<float> a(kCount), rs(kCount), ag(kCount * kRanks);
        std::vector<float> rs_in(kCount * kRanks);
        for (float& x : a) x = dist(gen);
        for (float& x : rs_in) x = dist(gen);
        if (absl::Status s = comm.AllReduce(comm::HostView(absl::MakeSpan(a)),
                                            comm::ReduceOp::kSum)
                                 ->Wait();
            !s.ok()) {
          return s;
        }
        if (absl::Status s =
                comm.ReduceScatter(comm::HostView(absl::MakeSpan(rs_in)),
                                   comm::HostView(absl::MakeSpan(rs)),
                                   comm::ReduceOp::kAvg)
                    ->Wait();
            !s.ok()) {
          return s;
        }
        if (absl::Status s = comm.AllGather(comm::HostView(absl::MakeSpan(rs)),
                                            comm::HostView(absl::MakeSpan(ag)))
                                 ->Wait();
            !s.ok()) {
          return s;
        }
        std::vector<uint32_t>& out = bits[rank];
        out.resize(a.size() + ag.size());
        std::memcpy(out.data(), a.data(), a.size() * 4);
        std::memcpy(out.data() + a.size(), ag.data(), ag.size() * 4);
        return absl::OkStatus();
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
  return bits;
}

TEST(FiberModesTest, FibersGiveTheThreadsResultsBitForBit) {
  const auto threads = Results(sim::RankExecution::kThreads);
  const auto fibers = Results(sim::RankExecution::kFibers);
  ASSERT_EQ(threads.size(), fibers.size());
  for (size_t r = 0; r < threads.size(); ++r) {
    ASSERT_FALSE(threads[r].empty());
    EXPECT_EQ(threads[r], fibers[r]) << "rank " << r;
  }
}

}  // namespace
}  // namespace tandem
