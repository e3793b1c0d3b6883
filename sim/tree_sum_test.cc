// sim's native tree_sum (Communicator::native_tree_sum): AllReduce and
// ReduceScatter with ReduceOp::kTreeSum give the bits of comm/ordered's
// portable collectives (Send/Recv and AllGather, which run here when the
// communicator is wrapped in a TrafficCounter, since the counter does not
// forward native_tree_sum) at every world size, in both rank executions;
// and they are not the rank-order sum (kSum), which would be the bug.
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/ordered/order_sensitive_terms.h"
#include "comm/ordered/ordered_sum.h"
#include "comm/traffic_counter.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

using ::testing::HasSubstr;
using TreeSumTest = testing::ModeTest;

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Each rank's terms (order-sensitive) of `count` elements.
std::vector<float> Terms(int rank, int64_t count) {
  return comm::OrderSensitiveTerms<float>(rank, count);
}

TEST_P(TreeSumTest, AllReduceEqualsThePortableOrderedSum) {
  // Odd counts: slices and chunks that do not divide evenly.
  for (int world : {2, 3, 4, 5, 8}) {
    RunResult r = RunRanks(
        world, [world](int rank, comm::Communicator& comm) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(
              Expect(comm.native_tree_sum(), "sim offers tree_sum"));
          const int64_t count = 4099;
          std::vector<float> native = Terms(rank, count);
          TANDEM_RETURN_IF_ERROR(comm::OrderedAllReduce(
              comm, comm::HostView(absl::MakeSpan(native))));
          comm::TrafficCounter portable_comm(comm);
          TANDEM_RETURN_IF_ERROR(Expect(!portable_comm.native_tree_sum(),
                                        "the counter runs the portable path"));
          std::vector<float> portable = Terms(rank, count);
          TANDEM_RETURN_IF_ERROR(comm::OrderedAllReduce(
              portable_comm, comm::HostView(absl::MakeSpan(portable))));
          TANDEM_RETURN_IF_ERROR(
              Expect(SameBits(native, portable),
                     absl::StrCat("world ", world, ": native != portable")));
          std::vector<float> rank_order = Terms(rank, count);
          TANDEM_RETURN_IF_ERROR(
              comm.AllReduce(comm::HostView(absl::MakeSpan(rank_order)),
                             comm::ReduceOp::kSum)
                  ->Wait());
          // With two ranks the tree is the rank-order sum; from three on
          // the terms make them differ.
          return Expect(
              (world == 2) == SameBits(native, rank_order),
              absl::StrCat("world ", world,
                           ": tree_sum vs sum in rank order, expected ",
                           world == 2 ? "equal" : "different"));
        });
    ASSERT_TRUE(r.ok()) << r.status();
  }
}

TEST_P(TreeSumTest, ReduceScatterEqualsThePortableOrderedSum) {
  for (int world : {2, 3, 4, 6}) {
    RunResult r = RunRanks(
        world, [world](int rank, comm::Communicator& comm) -> absl::Status {
          const int64_t c = 1027;
          std::vector<float> send = Terms(rank, world * c);
          std::vector<float> native(c), portable(c);
          TANDEM_RETURN_IF_ERROR(comm::OrderedReduceScatter(
              comm, comm::HostView(absl::MakeSpan(send)),
              comm::HostView(absl::MakeSpan(native))));
          comm::TrafficCounter portable_comm(comm);
          TANDEM_RETURN_IF_ERROR(comm::OrderedReduceScatter(
              portable_comm, comm::HostView(absl::MakeSpan(send)),
              comm::HostView(absl::MakeSpan(portable))));
          return Expect(SameBits(native, portable),
                        absl::StrCat("world ", world, " rank ", rank,
                                     ": native != portable"));
        });
    ASSERT_TRUE(r.ok()) << r.status();
  }
}

TEST_P(TreeSumTest, RefusesIntegers) {
  RunResult r = RunRanks(2, [](int, comm::Communicator& comm) -> absl::Status {
    std::vector<int32_t> v = {1, 2};
    return comm
        .AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kTreeSum)
        ->Wait();
  });
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("tree_sum needs a floating"));
}

TANDEM_SIM_TEST_BOTH_MODES(TreeSumTest);

}  // namespace
}  // namespace tandem::sim
