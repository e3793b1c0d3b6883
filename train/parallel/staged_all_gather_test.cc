#include "train/parallel/staged_all_gather.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(StagedAllGatherTest, GathersEveryRanksValuesInRankOrderOnTheCpu) {
  std::vector<std::vector<int64_t>> got(3);
  sim::RunResult result = sim::Run(3, [&](int rank, comm::Communicator& comm) {
    const std::vector<int64_t> mine = {rank, -10 * rank};
    got[rank].resize(6);
    return AllGatherInt64(comm, Device::CPU(), mine, absl::MakeSpan(got[rank]));
  });
  ASSERT_TRUE(result.status().ok()) << result.status();
  for (const std::vector<int64_t>& g : got) {
    EXPECT_THAT(g, ElementsAre(0, 0, 1, -10, 2, -20));
  }
}

TEST(StagedAllGatherTest, WrongReceiveSizeIsRejectedBeforeCommunicating) {
  sim::RunResult result = sim::Run(2, [](int, comm::Communicator& comm) {
    std::vector<int64_t> recv(3);
    return AllGatherInt64(comm, Device::CPU(), std::vector<int64_t>{1, 2},
                          absl::MakeSpan(recv));
  });
  EXPECT_EQ(result.ranks[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.ranks[1].message(),
              HasSubstr("AllGatherInt64 on rank 1: recv holds 3 values; "
                        "expected 2 sent values x 2 ranks"));
}

}  // namespace
}  // namespace tandem::train
