#include "train/examples/ddp_demo/ddp_demo_lib.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

struct DemoRun {
  absl::Status status;
  std::vector<std::string> lines;  // rank 0's; the others print nothing
};

DemoRun RunOnSim(int world_size, const DdpDemoConfig& config) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult r = sim::Run(
      world_size,
      [&](int, comm::Communicator& comm) { return RunDdpDemo(comm, config); },
      options);
  for (int rank = 1; rank < world_size; ++rank) {
    EXPECT_TRUE(capture.Lines(rank).empty()) << "rank " << rank << " printed";
  }
  return {r.status(), capture.Lines(0)};
}

DdpDemoConfig Small() {
  DdpDemoConfig c;
  c.batchSize = 4;
  c.epochs = 2;
  c.dataset_size = 12;  // 6 per rank on 2 ranks: batches of 4 and 2
  return c;
}

TEST(DdpDemoTest, PrintsTheScriptsLines) {
  DemoRun run = RunOnSim(2, Small());
  ASSERT_TRUE(run.status.ok()) << run.status;
  ASSERT_EQ(run.lines.size(), 6u);
  const char* kStep = R"(Step: [01], Loss: [0-9]\.[0-9]+)";
  EXPECT_THAT(run.lines[0], MatchesRegex(kStep));
  EXPECT_THAT(run.lines[1], MatchesRegex(kStep));
  EXPECT_EQ(run.lines[2], "Epoch 0 Finished !");
  EXPECT_THAT(run.lines[3], MatchesRegex(kStep));
  EXPECT_EQ(run.lines[5], "Epoch 1 Finished !");
  // CrossEntropy of a softmax output (the script's double softmax) over 10
  // classes with every label 0 lies in [log(9 + e) - 1, log(10)].
  for (const std::string& line : run.lines) {
    if (line.rfind("Step", 0) != 0) continue;
    const double loss = std::atof(line.substr(line.find("Loss: ") + 6).c_str());
    EXPECT_GE(loss, std::log(9 + std::exp(1.0)) - 1 - 1e-6) << line;
    EXPECT_LE(loss, std::log(10.0) + 1e-6) << line;
  }
}

TEST(DdpDemoTest, SameSeedSameLines) {
  DemoRun a = RunOnSim(2, Small());
  DemoRun b = RunOnSim(2, Small());
  EXPECT_EQ(a.lines, b.lines);
  DdpDemoConfig other = Small();
  other.seed = 1;
  EXPECT_NE(RunOnSim(2, other).lines, a.lines);
}

TEST(DdpDemoTest, BadConfigIsNamed) {
  DdpDemoConfig c = Small();
  c.num_classes = 0;
  DemoRun run = RunOnSim(1, c);
  EXPECT_EQ(run.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      run.status.ToString(),
      HasSubstr(
          "ddp_demo: --num-classes=0 (expected 1 <= num_classes <= 10000)"));
}

// The checkpoint records the flags as the script spells them.
TEST(DdpDemoTest, AResumeNamesTheScriptsSpellings) {
  DdpDemoConfig c = Small();
  c.epochs = 1;
  c.checkpoint.dir = ::testing::TempDir() + "/ddp_demo_spellings";
  ASSERT_TRUE(RunOnSim(2, c).status.ok());
  c.epochs = 2;
  c.dataset_size = 16;
  EXPECT_THAT(RunOnSim(2, c).status.message(),
              HasSubstr("--dataset-size is 12 there and 16 here"));
}

}  // namespace
}  // namespace tandem::train
