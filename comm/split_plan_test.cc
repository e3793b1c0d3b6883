// PlanFromGathered: membership by color, order by key then parent rank,
// kNoColor, and bad colors named by rank. (PlanSplit's all-gather runs in
// every engine's split tests.)
#include "comm/split_plan.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// 5 ranks: (color, key) = (1, 0), (0, 5), (1, -3), (-1, 0), (0, 5).
const std::vector<int64_t> kPairs = {1, 0, 0, 5, 1, -3, -1, 0, 0, 5};

TEST(SplitPlanTest, GroupsByColorAndOrdersByKeyThenRank) {
  absl::StatusOr<SplitPlan> p0 = PlanFromGathered(0, kPairs);
  ASSERT_TRUE(p0.ok()) << p0.status();
  EXPECT_EQ(p0->color, 1);
  EXPECT_THAT(p0->members, ElementsAre(2, 0));  // key -3 before key 0
  EXPECT_EQ(p0->sub_rank, 1);
  absl::StatusOr<SplitPlan> p4 = PlanFromGathered(4, kPairs);
  ASSERT_TRUE(p4.ok()) << p4.status();
  EXPECT_THAT(p4->members, ElementsAre(1, 4));  // equal keys: by rank
  EXPECT_EQ(p4->sub_rank, 1);
}

TEST(SplitPlanTest, NoColorGetsNoMembers) {
  absl::StatusOr<SplitPlan> p = PlanFromGathered(3, kPairs);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->color, Communicator::kNoColor);
  EXPECT_TRUE(p->members.empty());
  EXPECT_EQ(p->sub_rank, -1);
}

TEST(SplitPlanTest, ABadColorFailsEveryRankNamingIt) {
  const std::vector<int64_t> pairs = {0, 0, -7, 0, 0, 1};
  for (int r = 0; r < 3; ++r) {
    absl::StatusOr<SplitPlan> p = PlanFromGathered(r, pairs);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr("rank 1 passed color -7"));
  }
}

TEST(SplitPlanTest, ARankOutsideTheGatheredWorldIsAnError) {
  EXPECT_EQ(PlanFromGathered(5, kPairs).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::comm
