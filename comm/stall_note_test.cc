#include "comm/stall_note.h"

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

}  // namespace
}  // namespace tandem::comm
