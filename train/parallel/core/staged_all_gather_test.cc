#include "train/parallel/core/staged_all_gather.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/types.h"
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

TEST(StagedAllGatherTest, DoublesArriveBitForBit) {
  std::vector<std::vector<double>> got(2);
  sim::RunResult result = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    const std::vector<double> mine = {
        rank == 0 ? -0.0 : 0.1, std::numeric_limits<double>::denorm_min()};
    got[rank].resize(4);
    return AllGatherF64Bits(comm, Device::CPU(), mine,
                            absl::MakeSpan(got[rank]));
  });
  ASSERT_TRUE(result.status().ok()) << result.status();
  for (const std::vector<double>& g : got) {
    EXPECT_TRUE(std::signbit(g[0]));  // -0 stays -0
    EXPECT_EQ(g[1], std::numeric_limits<double>::denorm_min());
    EXPECT_EQ(g[2], 0.1);
  }
}

TEST(StagedAllGatherTest, StringsOfAnyLengthInRankOrder) {
  std::vector<std::vector<std::string>> got(3);
  sim::RunResult result = sim::Run(3, [&](int rank, comm::Communicator& comm) {
    const std::string mine[] = {"", std::string("a\0b", 3),
                                "a longer string than a word"};
    absl::StatusOr<std::vector<std::string>> all =
        AllGatherStrings(comm, Device::CPU(), mine[rank]);
    if (!all.ok()) return all.status();
    got[rank] = *all;
    return absl::OkStatus();
  });
  ASSERT_TRUE(result.status().ok()) << result.status();
  for (const std::vector<std::string>& g : got) {
    EXPECT_THAT(g, ElementsAre("", std::string("a\0b", 3),
                               "a longer string than a word"));
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

TEST(StagedAllReduceTest, ReducesInPlaceOnTheCpu) {
  std::vector<std::vector<int64_t>> got(3);
  sim::RunResult result = sim::Run(3, [&](int rank, comm::Communicator& comm) {
    got[rank] = {rank, -rank};
    return AllReduceInt64(comm, Device::CPU(), absl::MakeSpan(got[rank]),
                          comm::ReduceOp::kMax);
  });
  ASSERT_TRUE(result.status().ok()) << result.status();
  for (const std::vector<int64_t>& g : got) EXPECT_THAT(g, ElementsAre(2, 0));
}

TEST(StagedAllReduceTest, SameOnEveryRankTellsAgreementFromDisagreement) {
  for (int64_t odd : {int64_t{7}, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(), int64_t{-1}}) {
    std::vector<int> same(4, -1);
    std::vector<int> differs(4, -1);
    sim::RunResult result =
        sim::Run(4, [&](int rank, comm::Communicator& comm) -> absl::Status {
          absl::StatusOr<bool> a = SameOnEveryRank(comm, Device::CPU(), odd);
          if (!a.ok()) return a.status();
          same[rank] = *a;
          // Only rank 2 differs (by one).
          absl::StatusOr<bool> b =
              SameOnEveryRank(comm, Device::CPU(), rank == 2 ? odd ^ 1 : odd);
          if (!b.ok()) return b.status();
          differs[rank] = *b;
          return absl::OkStatus();
        });
    ASSERT_TRUE(result.status().ok()) << result.status();
    EXPECT_THAT(same, ::testing::Each(1)) << odd;
    EXPECT_THAT(differs, ::testing::Each(0)) << odd;
  }
}

}  // namespace
}  // namespace tandem::train
