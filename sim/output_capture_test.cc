#include "sim/output_capture.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(OutputCaptureTest, KeepsLinesPerRankAndInOrder) {
  OutputCapture capture;
  capture.Reset(2);
  EXPECT_EQ(capture.world_size(), 2);
  capture.sink(1).WriteLine("b");
  capture.sink(0).WriteLine("a");
  capture.sink(1).WriteLine("c");
  EXPECT_THAT(capture.Lines(0), ElementsAre("a"));
  EXPECT_THAT(capture.Lines(1), ElementsAre("b", "c"));
  EXPECT_THAT(capture.Lines(5), IsEmpty());
  const auto all = capture.AllLines();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].rank, 0);
  EXPECT_EQ(all[1].text, "a");
  capture.Reset(3);
  EXPECT_THAT(capture.Lines(1), IsEmpty());
  EXPECT_TRUE(capture.AllLines().empty());
}

}  // namespace
}  // namespace tandem::sim
