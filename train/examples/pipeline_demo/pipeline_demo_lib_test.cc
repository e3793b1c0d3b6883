// The pipeline demo on the simulated cluster: what rank 0 prints, that the
// loss falls, that GPipe and 1F1B print the same lines, 2-D runs, and the
// errors for worlds that do not fit.
#include "train/examples/pipeline_demo/pipeline_demo_lib.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

struct Output {
  absl::Status status;
  std::vector<std::string> lines;  // rank 0's
};

Output RunDemo(int world, const PipelineDemoConfig& config) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  options.timeout = absl::Seconds(60);
  sim::RunResult r = sim::Run(
      world,
      [&](int, comm::Communicator& comm) {
        return RunPipelineDemo(comm, config);
      },
      options);
  for (int rank = 1; rank < world; ++rank) {
    EXPECT_TRUE(capture.Lines(rank).empty()) << "rank " << rank << " printed";
  }
  return {r.status(), capture.Lines(0)};
}

double LossOf(const std::string& line) {
  std::vector<std::string> words = absl::StrSplit(line, ' ');
  double v = -1;
  EXPECT_TRUE(words.size() == 4 && absl::SimpleAtod(words[3], &v)) << line;
  return v;
}

TEST(PipelineDemoTest, PrintsTheRunAndTheLossFalls) {
  PipelineDemoConfig c;
  c.steps = 30;
  Output out = RunDemo(2, c);
  ASSERT_TRUE(out.status.ok()) << out.status;
  ASSERT_EQ(out.lines.size(), 31u);
  EXPECT_EQ(out.lines[0],
            "pipeline_demo: 2 stages x 1 replicas, 1f1b, 4 chunks, 4 layers");
  EXPECT_THAT(out.lines[1], HasSubstr("step 0 loss "));
  EXPECT_LT(LossOf(out.lines[30]), 0.5 * LossOf(out.lines[1]));
}

TEST(PipelineDemoTest, GpipeAndOneFOneBPrintTheSameLosses) {
  PipelineDemoConfig c;
  c.steps = 5;
  c.chunks = 3;
  Output ofob = RunDemo(4, c);
  c.schedule = "gpipe";
  Output gpipe = RunDemo(4, c);
  ASSERT_TRUE(ofob.status.ok()) << ofob.status;
  ASSERT_TRUE(gpipe.status.ok()) << gpipe.status;
  ASSERT_EQ(ofob.lines.size(), gpipe.lines.size());
  for (size_t i = 1; i < ofob.lines.size(); ++i) {
    EXPECT_EQ(ofob.lines[i], gpipe.lines[i]);
  }
}

TEST(PipelineDemoTest, TwoStagesTimesTwoReplicasTrains) {
  PipelineDemoConfig c;
  c.steps = 30;
  c.replicas = 2;
  Output out = RunDemo(4, c);
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.lines[0],
            "pipeline_demo: 2 stages x 2 replicas, 1f1b, 4 chunks, 4 layers");
  EXPECT_LT(LossOf(out.lines.back()), 0.5 * LossOf(out.lines[1]));
}

TEST(PipelineDemoTest, WorldsThatDoNotFitAreNamed) {
  PipelineDemoConfig c;
  c.replicas = 2;
  EXPECT_THAT(RunDemo(3, c).status.message(),
              HasSubstr("world size (3) must be a multiple of --replicas (2)"));
  c.replicas = 1;
  c.layers = 2;
  EXPECT_THAT(RunDemo(3, c).status.message(),
              HasSubstr("3 stages need at least as many layers"));
  EXPECT_THAT(RunDemo(2, {.chunks = 0}).status.message(),
              HasSubstr("--chunks=0 (expected 1 <= chunks <= 1024)"));
  EXPECT_THAT(RunDemo(2, {.lr = 10.5}).status.message(),
              HasSubstr("--lr=10.5 (expected 0 < lr <= 10)"));
}

}  // namespace
}  // namespace tandem::train
