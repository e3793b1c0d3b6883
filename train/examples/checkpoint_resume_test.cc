// Bit-identical resume, end to end: an example trained straight through and
// the same example killed mid-epoch 2 (sim's fault injection fails rank 1 at
// one of its collectives, as if its process died) and then restarted on the
// same --checkpoint_dir end with byte-identical checkpoints (weights,
// optimizer state, progress) and print the same lines from the resumed
// epoch on.
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
#include "train/checkpoint/safetensors.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/examples/amp_ddp/amp_ddp_lib.h"
#include "train/examples/digits_ddp/digits_ddp_lib.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// Collective of rank 1 at which amp_ddp's run is killed, and the progress
// ("epoch/step") of the checkpoint that kill leaves: mid-run, after step 2.
constexpr int64_t kAmpFailAt = 21;
constexpr char kAmpProgressAtKill[] = "0/5";

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

struct Outcome {
  absl::Status status;
  std::vector<std::string> lines;  // rank 0's
};

// Runs `fn` on 2 simulated ranks, rank 1 failing at its collective
// `fail_at` (none when < 0).
template <typename Fn>
Outcome RunSim(Fn fn, int64_t fail_at = -1) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  if (fail_at >= 0) options.faults = {sim::Fault::FailAt(1, fail_at)};
  sim::RunResult r = sim::Run(2, fn, options);
  return {r.status(), capture.Lines(0)};
}

std::string FileBytes(const std::string& path) {
  absl::StatusOr<std::string> b = checkpoint::ReadFile(path);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : "";
}

// The saved progress in `dir` ("epoch/step_in_epoch").
std::string Progress(const std::string& dir) {
  absl::StatusOr<checkpoint::SafetensorsContent> c =
      checkpoint::LoadSafetensors(dir + "/" + checkpoint::kTrainingStateFile);
  if (!c.ok()) return c.status().ToString();
  return c->metadata["epoch"] + "/" + c->metadata["step_in_epoch"];
}

// Lines from the first one that starts with `prefix`.
std::vector<std::string> From(const std::vector<std::string>& lines,
                              const std::string& prefix) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(prefix, 0) == 0) {
      return std::vector<std::string>(lines.begin() + i, lines.end());
    }
  }
  return {};
}

TEST(CheckpointResumeTest, ToyDdpKilledMidEpochTwoResumesBitForBit) {
  ToyDdpConfig config;
  config.batch_size = 1;  // 3 steps per epoch and rank on 2 ranks
  config.loss_precision = 17;
  config.log_ranks = "0";
  config.checkpoint.every_steps = 1;
  auto run = [&config](const std::string& dir) {
    return [&config, dir](int, comm::Communicator& comm) {
      ToyDdpConfig c = config;
      c.checkpoint.dir = dir;
      return RunToyDdp(comm, c);
    };
  };
  const std::string straight = TestDir("toy_straight");
  Outcome a = RunSim(run(straight));
  ASSERT_TRUE(a.status.ok()) << a.status;

  const std::string killed = TestDir("toy_killed");
  // Collective 17 of rank 1 falls in epoch 2's second step (asserted below
  // through the checkpoint it leaves).
  Outcome b = RunSim(run(killed), /*fail_at=*/17);
  ASSERT_FALSE(b.status.ok());
  EXPECT_THAT(b.status.ToString(), HasSubstr("injected fault"));
  EXPECT_EQ(Progress(killed), "1/1") << "not killed mid-epoch 2";

  Outcome c = RunSim(run(killed));
  ASSERT_TRUE(c.status.ok()) << c.status;
  ASSERT_FALSE(c.lines.empty());
  EXPECT_EQ(c.lines[0], "toy_ddp: resuming from " + killed +
                            " at epoch 2, step 2 (after 4 steps)");
  EXPECT_EQ(std::vector<std::string>(c.lines.begin() + 1, c.lines.end()),
            std::vector<std::string>(a.lines.begin() + 4, a.lines.end()));
  for (const char* file :
       {checkpoint::kModelFile, checkpoint::kTrainingStateFile}) {
    EXPECT_EQ(FileBytes(killed + "/" + file), FileBytes(straight + "/" + file))
        << file;
  }
}

TEST(CheckpointResumeTest, DigitsDdpWithMomentumResumesBitForBit) {
  DigitsConfig config;
  config.epochs = 3;  // 23 steps per epoch on 2 ranks
  config.checkpoint.every_steps = 5;
  auto run = [&config](const std::string& dir) {
    return [&config, dir](int, comm::Communicator& comm) {
      DigitsConfig c = config;
      c.checkpoint.dir = dir;
      return RunDigitsDdp(comm, c).status();
    };
  };
  const std::string straight = TestDir("digits_straight");
  Outcome a = RunSim(run(straight));
  ASSERT_TRUE(a.status.ok()) << a.status;

  const std::string killed = TestDir("digits_killed");
  // Collective 80 of rank 1 falls in epoch 2 after its 7th step was saved.
  Outcome b = RunSim(run(killed), /*fail_at=*/80);
  ASSERT_FALSE(b.status.ok());
  const std::string progress = Progress(killed);
  EXPECT_EQ(progress, "1/7") << "not killed mid-epoch 2";

  Outcome c = RunSim(run(killed));
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_THAT(c.lines[0], HasSubstr("resuming from " + killed + " at epoch 2"));
  EXPECT_EQ(From(c.lines, "Epoch: 002"), From(a.lines, "Epoch: 002"));
  for (const char* file :
       {checkpoint::kModelFile, checkpoint::kTrainingStateFile}) {
    EXPECT_EQ(FileBytes(killed + "/" + file), FileBytes(straight + "/" + file))
        << file;
  }
}

// digits_ddp (Sgd with momentum, 3 epochs, 2 ranks) checkpointed in one
// shard mode, killed in epoch 2 and resumed in another: the printed epochs
// and the final files equal an uninterrupted --shard=none run's, byte for
// byte (every mode trains DDP's weights bit for bit, and a sharded
// checkpoint holds the full, gathered state).
struct ShardResumeCase {
  const char* killed_mode;
  const char* resumed_mode;
  int64_t fail_at;  // rank 1's collective that dies, in epoch 2
};

class ShardCheckpointResumeTest
    : public ::testing::TestWithParam<ShardResumeCase> {};

TEST_P(ShardCheckpointResumeTest, DigitsResumesBitForBitAcrossShardModes) {
  const ShardResumeCase& p = GetParam();
  DigitsConfig config;
  config.epochs = 3;  // 23 steps per epoch on 2 ranks
  config.checkpoint.every_steps = 5;
  auto run = [&config](const std::string& dir, const char* mode) {
    return [&config, dir, mode](int, comm::Communicator& comm) {
      DigitsConfig c = config;
      c.checkpoint.dir = dir;
      c.shard = mode;
      return RunDigitsDdp(comm, c).status();
    };
  };
  const std::string name =
      std::string(p.killed_mode) + "_to_" + std::string(p.resumed_mode);
  const std::string straight = TestDir("shard_straight_" + name);
  Outcome a = RunSim(run(straight, "none"));
  ASSERT_TRUE(a.status.ok()) << a.status;
  // The same files from a straight run in the killed run's mode.
  const std::string straight_mode = TestDir("shard_straight_mode_" + name);
  Outcome a_mode = RunSim(run(straight_mode, p.killed_mode));
  ASSERT_TRUE(a_mode.status.ok()) << a_mode.status;
  EXPECT_EQ(From(a_mode.lines, "Epoch: 001"), From(a.lines, "Epoch: 001"));
  for (const char* file :
       {checkpoint::kModelFile, checkpoint::kTrainingStateFile}) {
    EXPECT_EQ(FileBytes(straight_mode + "/" + file),
              FileBytes(straight + "/" + file))
        << p.killed_mode << ": " << file;
  }

  const std::string killed = TestDir("shard_killed_" + name);
  Outcome b = RunSim(run(killed, p.killed_mode), p.fail_at);
  ASSERT_FALSE(b.status.ok());
  EXPECT_THAT(b.status.ToString(), HasSubstr("injected fault"));
  const std::string progress = Progress(killed);
  EXPECT_EQ(progress.substr(0, 2), "1/") << "not killed in epoch 2";
  EXPECT_NE(progress, "1/0") << "not killed mid-epoch 2";

  Outcome c = RunSim(run(killed, p.resumed_mode));
  ASSERT_TRUE(c.status.ok()) << c.status;
  ASSERT_FALSE(c.lines.empty());
  EXPECT_THAT(c.lines[0], HasSubstr("resuming from " + killed + " at epoch 2"));
  EXPECT_EQ(From(c.lines, "Epoch: 002"), From(a.lines, "Epoch: 002"));
  for (const char* file :
       {checkpoint::kModelFile, checkpoint::kTrainingStateFile}) {
    EXPECT_EQ(FileBytes(killed + "/" + file), FileBytes(straight + "/" + file))
        << file;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ShardCheckpointResumeTest,
    ::testing::Values(ShardResumeCase{"zero1", "zero1", 130},
                      ShardResumeCase{"zero2", "zero2", 130},
                      ShardResumeCase{"fsdp", "fsdp", 260},
                      ShardResumeCase{"fsdp", "none", 260},
                      ShardResumeCase{"zero2", "fsdp", 130}),
    [](const auto& info) {
      return std::string(info.param.killed_mode) + "_to_" +
             info.param.resumed_mode;
    });

TEST(CheckpointResumeTest, AmpDdpResumesWithTheGradScalersState) {
  AmpDdpConfig config;
  config.steps = 10;
  // The inf halves the scale at step 2, before the kill: the resumed run
  // must continue from 32768, not from a fresh 65536.
  config.inject_inf = "1:2";
  config.checkpoint.every_steps = 1;
  auto run = [&config](const std::string& dir) {
    return [&config, dir](int, comm::Communicator& comm) {
      AmpDdpConfig c = config;
      c.checkpoint.dir = dir;
      return RunAmpDdp(comm, c);
    };
  };
  const std::string straight = TestDir("amp_straight");
  Outcome a = RunSim(run(straight));
  ASSERT_TRUE(a.status.ok()) << a.status;

  const std::string killed = TestDir("amp_killed");
  Outcome b = RunSim(run(killed), /*fail_at=*/kAmpFailAt);
  ASSERT_FALSE(b.status.ok());
  EXPECT_EQ(Progress(killed), kAmpProgressAtKill) << "not killed mid-run";

  Outcome c = RunSim(run(killed));
  ASSERT_TRUE(c.status.ok()) << c.status;
  ASSERT_GE(c.lines.size(), 2u);
  EXPECT_THAT(c.lines[0], HasSubstr("amp_ddp: resuming from " + killed));
  const std::vector<std::string> rest(c.lines.begin() + 1, c.lines.end());
  EXPECT_THAT(rest.front(), HasSubstr("scale 32768"));
  EXPECT_EQ(rest,
            From(a.lines, rest.front().substr(0, rest.front().find(" | "))));
  for (const char* file :
       {checkpoint::kModelFile, checkpoint::kTrainingStateFile}) {
    EXPECT_EQ(FileBytes(killed + "/" + file), FileBytes(straight + "/" + file))
        << file;
  }
}

}  // namespace
}  // namespace tandem::train
