// resnet_ddp on image folders (both held-out layouts) and its bit-identical
// resume, on two simulated ranks with tiny images. How the images are split
// is train/data/datasets/image_splits_test's.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/options.h"
#include "sim/output_capture.h"
#include "sim/sim.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/image_testing.h"
#include "train/examples/resnet_ddp/resnet_ddp_lib.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr char kDigits[] = "train/data/digits.csv.gz";

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

struct Outcome {
  absl::Status status;
  ResnetResult result;              // rank 0's
  std::vector<std::string> epochs;  // rank 0's epoch lines, up to images/s
};

Outcome RunOnTwo(const ResnetConfig& config) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  Outcome out;
  sim::RunResult r = sim::Run(
      2,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        absl::StatusOr<ResnetResult> result = RunResnetDdp(comm, config);
        if (!result.ok()) return result.status();
        if (rank == 0) out.result = *result;
        return absl::OkStatus();
      },
      options);
  out.status = r.status();
  for (const std::string& line : capture.Lines(0)) {
    if (line.rfind("Epoch", 0) == 0) {
      out.epochs.push_back(line.substr(0, line.rfind(" | ")));
    }
  }
  return out;
}

ResnetConfig Tiny() {
  ResnetConfig c;
  c.image_size = 8;
  c.batch_size = 2;
  c.epochs = 1;
  c.lr = 0.01;
  return c;
}

TEST(ResnetDdpTest, FolderHoldsOutAFixedFraction) {
  const std::string root = TestDir("digits");
  ASSERT_TRUE(testing::WriteDigitsFolder(root, kDigits, 2).ok());
  ResnetConfig c = Tiny();
  c.data = root;
  c.val_fraction = 0.2;
  c.batch_size = 4;
  const Outcome o = RunOnTwo(c);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.result.val_total, 4);
  EXPECT_EQ(o.result.steps, 2);  // 16 images / 2 ranks / 4 per step
  ASSERT_EQ(o.epochs.size(), 1u);
  EXPECT_THAT(o.epochs[0], HasSubstr("/4)"));
}

TEST(ResnetDdpTest, FolderWithTrainAndValSubfolders) {
  const std::string root = TestDir("split");
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/train", kDigits, 1).ok());
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/val", kDigits, 1).ok());
  ResnetConfig c = Tiny();
  c.data = root;
  const Outcome o = RunOnTwo(c);
  ASSERT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.result.val_total, 10);
  EXPECT_EQ(o.result.steps, 2);  // 10 images / 2 ranks / 2 per step
  c.num_classes = 7;
  EXPECT_THAT(RunOnTwo(c).status.message(),
              HasSubstr("has 10 class folder(s)"));
}

// Trained straight through, and stopped by --max_steps in the middle of
// epoch 2 then resumed: the same final checkpoint, byte for byte (weights,
// BatchNorm running statistics, momentum, schedule), and the same epoch
// lines.
TEST(ResnetDdpTest, ResumeIsBitIdentical) {
  ResnetConfig c = Tiny();
  c.synthetic_size = 8;  // 2 steps per epoch
  c.num_classes = 4;
  c.epochs = 2;
  c.lr_schedule = "cosine";
  c.sync_bn = true;
  // Saves after steps 2 (epoch end), 3 (every 3) and 4.
  c.checkpoint = {.dir = TestDir("straight"), .every_steps = 3};
  const Outcome straight = RunOnTwo(c);
  ASSERT_TRUE(straight.status.ok()) << straight.status;
  ASSERT_EQ(straight.epochs.size(), 2u);

  ResnetConfig first = c;
  first.checkpoint.dir = TestDir("resumed");
  first.max_steps = 3;  // epoch 2, step 1
  const Outcome stopped = RunOnTwo(first);
  ASSERT_TRUE(stopped.status.ok()) << stopped.status;
  ResnetConfig second = c;
  second.checkpoint.dir = first.checkpoint.dir;
  const Outcome resumed = RunOnTwo(second);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_EQ(resumed.result.steps, 1);
  ASSERT_EQ(resumed.epochs.size(), 1u);
  EXPECT_EQ(resumed.epochs[0], straight.epochs[1]);
  for (const char* file :
       {checkpoint::kModelFile, checkpoint::kTrainingStateFile}) {
    absl::StatusOr<std::string> a =
        checkpoint::ReadFile(c.checkpoint.dir + "/" + file);
    absl::StatusOr<std::string> b =
        checkpoint::ReadFile(first.checkpoint.dir + "/" + file);
    ASSERT_TRUE(a.ok() && b.ok()) << file;
    EXPECT_TRUE(*a == *b) << file << " differs";
  }
}

}  // namespace
}  // namespace tandem::train
