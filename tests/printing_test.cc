// Rank-aware printing on the simulated cluster: exactly which rank printed
// which lines, for comm::RankPrinter directly and for
// //train/examples:toy_ddp's
// --log_ranks=all|0; lines stay whole under concurrent printing.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "comm/rank_printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::StartsWith;

TEST(PrintingTest, Rank0OnlyAndAllRanksWithPrefix) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult result = sim::Run(
      4,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        comm::RankPrinter out(comm);
        out.PrintOnRank0("epoch 1\nloss 0.25");
        out.PrintOnAllRanks(absl::StrCat("done ", rank * 10, "\n"));
        return absl::OkStatus();
      },
      options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(capture.Lines(0),
              ElementsAre("epoch 1", "loss 0.25", "[GPU0] done 0"));
  EXPECT_THAT(capture.Lines(1), ElementsAre("[GPU1] done 10"));
  EXPECT_THAT(capture.Lines(2), ElementsAre("[GPU2] done 20"));
  EXPECT_THAT(capture.Lines(3), ElementsAre("[GPU3] done 30"));
  EXPECT_EQ(capture.AllLines().size(), 6u);
}

TEST(PrintingTest, ConcurrentLinesStayWhole) {
  constexpr int kWorld = 4;
  constexpr int kLines = 300;
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  const std::string payload(200, 'x');
  sim::RunResult result = sim::Run(
      kWorld,
      [&](int, comm::Communicator& comm) -> absl::Status {
        comm::RankPrinter out(comm);
        for (int i = 0; i < kLines; ++i) {
          out.PrintOnAllRanks(absl::StrCat(i, " ", payload));
        }
        return absl::OkStatus();
      },
      options);
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<sim::OutputCapture::Line> all = capture.AllLines();
  ASSERT_EQ(all.size(), static_cast<size_t>(kWorld * kLines));
  std::vector<int> next(kWorld, 0);
  for (const sim::OutputCapture::Line& line : all) {
    ASSERT_GE(line.rank, 0);
    ASSERT_LT(line.rank, kWorld);
    // Whole, from the right rank, in that rank's order.
    EXPECT_EQ(line.text, absl::StrCat("[GPU", line.rank, "] ",
                                      next[line.rank]++, " ", payload));
  }
}

TEST(PrintingTest, ToyDdpLogRanksAll) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult result = sim::Run(
      3,
      [](int, comm::Communicator& comm) {
        return train::RunToyDdp(comm, train::ToyDdpConfig());
      },
      options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (int r = 0; r < 3; ++r) {
    const std::vector<std::string> lines = capture.Lines(r);
    ASSERT_EQ(lines.size(), 5u) << r;  // 3 epochs x 1 step + 2 accuracies
    for (const std::string& line : lines) {
      EXPECT_THAT(line, StartsWith(absl::StrCat("[GPU", r, "] "))) << r;
    }
  }
}

TEST(PrintingTest, ToyDdpLogRanks0PrintsOnlyRank0sLines) {
  train::ToyDdpConfig all_ranks;
  train::ToyDdpConfig rank0_only;
  rank0_only.log_ranks = "0";
  std::vector<std::vector<std::string>> by_config;
  for (const train::ToyDdpConfig& config : {all_ranks, rank0_only}) {
    sim::OutputCapture capture;
    sim::Options options;
    options.capture = &capture;
    sim::RunResult result = sim::Run(
        3,
        [&](int, comm::Communicator& comm) {
          return train::RunToyDdp(comm, config);
        },
        options);
    ASSERT_TRUE(result.ok()) << result.status();
    if (config.log_ranks == "0") {
      EXPECT_THAT(capture.Lines(1), IsEmpty());
      EXPECT_THAT(capture.Lines(2), IsEmpty());
    }
    by_config.push_back(capture.Lines(0));
  }
  // Rank 0 prints the same lines either way.
  EXPECT_EQ(by_config[0], by_config[1]);
  EXPECT_EQ(by_config[1].size(), 5u);
}

}  // namespace
}  // namespace tandem
