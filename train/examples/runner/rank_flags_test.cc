// CheckRankFlags on the simulated cluster: agreement first (a rule broken
// on one rank only still reports the disagreement, the same on every rank),
// then every broken rule named in one message; the rules' bounds.
#include "train/examples/runner/rank_flags.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

std::vector<absl::Status> Check(
    int n, const std::function<std::vector<RankFlag>(int)>& flags) {
  sim::RunResult result = sim::Run(n, [&](int rank, comm::Communicator& comm) {
    return CheckRankFlags(comm, Device::CPU(), "demo", flags(rank));
  });
  EXPECT_TRUE(result.launch.ok()) << result.launch;
  return result.ranks;
}

TEST(RankFlagsTest, GoodFlagsPass) {
  for (const absl::Status& s : Check(2, [](int) {
         return std::vector<RankFlag>{
             IntFlag("--epochs", 0, 0, 10),
             IntFlag("--batch_size", 1, 1),
             RealFlag("--fraction", 0.5, 0, 1, true, true),
             Flag("--lr", 0.1),
             Flag("--dir", "ck"),
             Flag("--seed", uint64_t{7})};
       })) {
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(RankFlagsTest, NamesEveryBrokenRuleOnEveryRank) {
  for (const absl::Status& s : Check(2, [](int) {
         return std::vector<RankFlag>{
             IntFlag("--epochs", -1, 0, 10), IntFlag("--batch_size", 0, 1),
             IntFlag("--hidden", 5, 1),
             RealFlag("--fraction", 1, 0, 1, true, true)};
       })) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "demo: --epochs=-1 (expected 0 <= epochs <= 10); "
              "--batch_size=0 (expected batch_size >= 1); --fraction=1 "
              "(expected 0 < fraction < 1). Every rank was given these "
              "values: fix the flags and start again");
  }
  for (const absl::Status& s : Check(1, [](int) {
         return std::vector<RankFlag>{
             IntFlag("--epochs", 11, 0, 10),
             RealFlag("--fraction", std::nan(""), 0, 1, true, true)};
       })) {
    EXPECT_EQ(s.message(),
              "demo: --epochs=11 (expected 0 <= epochs <= 10); --fraction=nan "
              "(expected 0 < fraction < 1). Every rank was given these "
              "values: fix the flags and start again");
  }
  for (const absl::Status& s : Check(1, [](int) {
         return std::vector<RankFlag>{IntFlag("--epochs", -1, 0, 10)};
       })) {
    EXPECT_THAT(std::string(s.message()),
                ::testing::EndsWith("Every rank was given this value: fix the "
                                    "flags and start again"));
  }
}

TEST(RankFlagsTest, DisagreementComesFirst) {
  // Rank 1's value breaks the rule, rank 0's does not: every rank reports
  // the disagreement (none fails alone on its own flags).
  for (const absl::Status& s : Check(2, [](int rank) {
         return std::vector<RankFlag>{IntFlag("--epochs", 3 - 4 * rank, 0, 10),
                                      Flag("--dir", "ck")};
       })) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "ranks disagree on the configuration: --epochs is 3 on rank 0 "
              "and -1 on rank 1; start every rank with the same flags and "
              "data");
  }
}

TEST(WithCheckpointFlagsTest, AppendsDirThenEveryAgreedWithoutRule) {
  const std::vector<RankFlag> flags = WithCheckpointFlags(
      {IntFlag("--epochs", 3, 0, 10)}, {.dir = "ck", .every_steps = 5});
  const std::vector<ConfigEntry> entries = Entries(flags);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "--epochs");
  EXPECT_EQ(entries[1].name, "--checkpoint_dir");
  EXPECT_EQ(entries[1].value, "ck");
  EXPECT_EQ(entries[2].name, "--checkpoint_every");
  EXPECT_EQ(entries[2].value, "5");
  EXPECT_TRUE(CheckFlagRules(flags).ok());
}

TEST(PerRankBatchTest, DividesOrNamesTheNearestSizes) {
  EXPECT_EQ(*PerRankBatch("demo", 64, 4), 16);
  EXPECT_EQ(*PerRankBatch("demo", 3, 3), 1);
  EXPECT_EQ(PerRankBatch("demo", 64, 3).status(),
            absl::InvalidArgumentError(
                "demo: --global_batch_size=64 is not divisible by 3 ranks; "
                "use 63 or 66 (each rank takes global_batch_size / world size "
                "samples per step), or change the number of ranks"));
  // Below the world size there is no smaller size to offer.
  EXPECT_THAT(std::string(PerRankBatch("demo", 2, 4).status().message()),
              ::testing::HasSubstr("; use 4 (each rank"));
}

}  // namespace
}  // namespace tandem::train
