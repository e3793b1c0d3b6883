// //train/examples:toy_ddp end to end on the simulated cluster: each rank's
// lines are exactly the lines PyTorch 1.13 prints for the same script (gloo,
// mp.spawn, CPU), pinned here from bench/peers/toy_ddp.py. Re-check against a
// live PyTorch with bench/peers/compare_toy_ddp.py.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

namespace tandem {
namespace {

using Lines = std::vector<std::string>;

// Runs the toy on `world` simulated ranks; each rank's captured lines.
std::vector<Lines> RunToy(int world, const train::ToyDdpConfig& config) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult result = sim::Run(
      world,
      [&](int, comm::Communicator& comm) {
        return train::RunToyDdp(comm, config);
      },
      options);
  EXPECT_TRUE(result.ok()) << result.status();
  std::vector<Lines> lines;
  for (int r = 0; r < world; ++r) lines.push_back(capture.Lines(r));
  return lines;
}

// bench/peers/toy_ddp.py --world_size=N, lines grouped by rank.
TEST(ToyDdpTest, WorldSize1MatchesPyTorch) {
  const std::vector<Lines> lines = RunToy(1, train::ToyDdpConfig());
  EXPECT_THAT(
      lines[0],
      ::testing::ElementsAre(
          "[GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.66",
          "[GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.33",
          "[GPU0] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.10",
          "[GPU0] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.07",
          "[GPU0] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.04",
          "[GPU0] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.01",
          "[GPU0] Training accuracy 1.0", "[GPU0] Test accuracy 1.0"));
}

TEST(ToyDdpTest, WorldSize2MatchesPyTorch) {
  const std::vector<Lines> lines = RunToy(2, train::ToyDdpConfig());
  EXPECT_THAT(
      lines[0],
      ::testing::ElementsAre(
          "[GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.66",
          "[GPU0] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.23",
          "[GPU0] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.13",
          "[GPU0] Training accuracy 1.0", "[GPU0] Test accuracy 1.0"));
  EXPECT_THAT(
      lines[1],
      ::testing::ElementsAre(
          "[GPU1] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.67",
          "[GPU1] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.45",
          "[GPU1] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.11",
          "[GPU1] Training accuracy 1.0", "[GPU1] Test accuracy 1.0"));
}

TEST(ToyDdpTest, WorldSize3MatchesPyTorch) {
  const std::vector<Lines> lines = RunToy(3, train::ToyDdpConfig());
  EXPECT_THAT(
      lines[0],
      ::testing::ElementsAre(
          "[GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.59",
          "[GPU0] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.33",
          "[GPU0] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.16",
          "[GPU0] Training accuracy 1.0", "[GPU0] Test accuracy 1.0"));
  EXPECT_THAT(
      lines[1],
      ::testing::ElementsAre(
          "[GPU1] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.75",
          "[GPU1] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.33",
          "[GPU1] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.15",
          "[GPU1] Training accuracy 1.0", "[GPU1] Test accuracy 1.0"));
  EXPECT_THAT(
      lines[2],
      ::testing::ElementsAre(
          "[GPU2] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.66",
          "[GPU2] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.25",
          "[GPU2] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.17",
          "[GPU2] Training accuracy 1.0", "[GPU2] Test accuracy 1.0"));
}

TEST(ToyDdpTest, WorldSize4MatchesPyTorch) {
  const std::vector<Lines> lines = RunToy(4, train::ToyDdpConfig());
  EXPECT_THAT(
      lines[0],
      ::testing::ElementsAre(
          "[GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.67",
          "[GPU0] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.12",
          "[GPU0] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.18",
          "[GPU0] Training accuracy 1.0", "[GPU0] Test accuracy 1.0"));
  EXPECT_THAT(
      lines[1],
      ::testing::ElementsAre(
          "[GPU1] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.66",
          "[GPU1] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.34",
          "[GPU1] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.28",
          "[GPU1] Training accuracy 1.0", "[GPU1] Test accuracy 1.0"));
  EXPECT_THAT(
      lines[2],
      ::testing::ElementsAre(
          "[GPU2] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.74",
          "[GPU2] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.37",
          "[GPU2] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.15",
          "[GPU2] Training accuracy 1.0", "[GPU2] Test accuracy 1.0"));
  EXPECT_THAT(
      lines[3],
      ::testing::ElementsAre(
          "[GPU3] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.67",
          "[GPU3] Epoch: 002/003 | Batchsize 002 | Train/Val Loss: 0.39",
          "[GPU3] Epoch: 003/003 | Batchsize 002 | Train/Val Loss: 0.03",
          "[GPU3] Training accuracy 1.0", "[GPU3] Test accuracy 1.0"));
}

// toy_ddp.py --world_size=2 --batch_size=1 --epochs=1 --lr=0.01 --seed=1:
// accuracies that are not 1.0 print as PyTorch's float32 division widened
// to a Python float.
TEST(ToyDdpTest, PartialAccuracyPrintsLikePyTorch) {
  train::ToyDdpConfig config;
  config.batch_size = 1;
  config.epochs = 1;
  config.lr = 0.01;
  config.seed = 1;
  const std::vector<Lines> lines = RunToy(2, config);
  EXPECT_THAT(
      lines[0],
      ::testing::ElementsAre(
          "[GPU0] Epoch: 001/001 | Batchsize 001 | Train/Val Loss: 0.37",
          "[GPU0] Epoch: 001/001 | Batchsize 001 | Train/Val Loss: 1.08",
          "[GPU0] Epoch: 001/001 | Batchsize 001 | Train/Val Loss: 1.01",
          "[GPU0] Training accuracy 0.3333333432674408",
          "[GPU0] Test accuracy 0.5"));
  EXPECT_THAT(
      lines[1],
      ::testing::ElementsAre(
          "[GPU1] Epoch: 001/001 | Batchsize 001 | Train/Val Loss: 1.16",
          "[GPU1] Epoch: 001/001 | Batchsize 001 | Train/Val Loss: 0.42",
          "[GPU1] Epoch: 001/001 | Batchsize 001 | Train/Val Loss: 0.37",
          "[GPU1] Training accuracy 0.6666666865348816",
          "[GPU1] Test accuracy 0.5"));
}

TEST(ToyDdpTest, RunsAreDeterministic) {
  train::ToyDdpConfig config;
  config.loss_precision = 9;
  EXPECT_EQ(RunToy(3, config), RunToy(3, config));
}

}  // namespace
}  // namespace tandem
