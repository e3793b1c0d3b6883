#include "comm/stall_note.h"

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(StallNoteTest, SaysWhoWaitsForWhatSinceWhenAndUntilWhen) {
  EXPECT_EQ(
      StallNote(0, "#3 AllReduce(f32 x 4, sum)", absl::Milliseconds(30050),
                "not yet reached by rank 1", absl::Milliseconds(269960)),
      "rank 0: still waiting for #3 AllReduce(f32 x 4, sum) for 30s; "
      "not yet reached by rank 1; timeout in 4m29.9s\n");
  EXPECT_EQ(StallNote(2, "x", absl::Seconds(1), "p", absl::InfiniteDuration()),
            "rank 2: still waiting for x for 1s; p; no timeout\n");
}

TEST(StallNoteTest, NamesAtMostSixteenMembersAndCountsTheRest) {
  EXPECT_EQ(NameMembers("rank", {}), "no ranks");
  EXPECT_EQ(NameMembers("rank", {1}), "rank 1");
  EXPECT_EQ(NameMembers("node", {1, 3}), "nodes 1, 3");
  std::vector<int64_t> many;
  for (int64_t r = 0; r < 106; ++r) many.push_back(r);
  EXPECT_EQ(NameMembers("rank", many),
            "ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 and 90 "
            "more");
  many.resize(16);
  EXPECT_EQ(NameMembers("rank", many),
            "ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15");
}

}  // namespace
}  // namespace tandem::comm
