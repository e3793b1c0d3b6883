#include "comm/rank_printer.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/line_sink.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(RankPrinterTest, RankZeroOnly) {
  CapturedLines r0, r1;
  RankPrinter(0, r0).PrintOnRank0("loss 0.5");
  RankPrinter(1, r1).PrintOnRank0("loss 0.5");
  EXPECT_THAT(r0.Lines(), ElementsAre("loss 0.5"));
  EXPECT_THAT(r1.Lines(), IsEmpty());
}

TEST(RankPrinterTest, AllRanksArePrefixedPerLine) {
  CapturedLines sink;
  RankPrinter(3, sink).PrintOnAllRanks("a\nb\n");
  EXPECT_THAT(sink.Lines(), ElementsAre("[GPU3] a", "[GPU3] b"));
  EXPECT_EQ(RankName(12), "GPU12");
}

TEST(RankPrinterTest, EmptyTextPrintsOneEmptyLine) {
  CapturedLines sink;
  RankPrinter(0, sink).PrintOnRank0("");
  EXPECT_THAT(sink.Lines(), ElementsAre(""));
}

// Lines written concurrently by several ranks into one sink stay whole.
TEST(RankPrinterTest, ConcurrentLinesStayWhole) {
  CapturedLines sink;
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&sink, r] {
      RankPrinter printer(r, sink);
      for (int i = 0; i < 200; ++i)
        printer.PrintOnAllRanks(absl::StrCat("line ", i));
    });
  }
  for (auto& t : threads) t.join();
  const std::vector<std::string> lines = sink.Lines();
  ASSERT_EQ(lines.size(), 800u);
  std::vector<int> next(4, 0);
  for (const std::string& line : lines) {
    ASSERT_EQ(line.substr(0, 4), "[GPU");
    const int r = line[4] - '0';
    ASSERT_EQ(line, absl::StrCat("[GPU", r, "] line ", next[r]));
    ++next[r];
  }
}

}  // namespace
}  // namespace tandem::comm
