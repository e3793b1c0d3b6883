// The virtual world, end to end on the examples: the same run under
// --virtual_world=K at every allowed world size W prints the same lines
// (rank 0 prints them all; the other ranks nothing) and writes the same
// checkpoint bytes; a run killed mid-epoch at one W and resumed at another
// ends with the bytes of an uninterrupted run; at W = K the losses stay
// within float rounding of plain DDP at K ranks (which equals PyTorch's);
// bad combinations are refused before training, naming the values.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/options.h"
#include "sim/output_capture.h"
#include "sim/sim.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/safetensors.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/datasets/byte_corpus.h"
#include "train/examples/amp_ddp/amp_ddp_lib.h"
#include "train/examples/ddp_demo/ddp_demo_lib.h"
#include "train/examples/digits_ddp/digits_ddp_lib.h"
#include "train/examples/gpt_ddp/gpt_ddp_lib.h"
#include "train/examples/gpt_ddp/gpt_ddp_testing.h"
#include "train/examples/resnet_ddp/resnet_ddp_lib.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// Collective of the last rank of 4 at which digits_ddp (2 epochs of 23
// steps, --virtual_world=4, a checkpoint every 5 global steps) is killed:
// in epoch 2, after its checkpoint at step 7 (asserted through the
// checkpoint's progress).
constexpr int64_t kDigitsFailAt = 150;

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

struct Outcome {
  absl::Status status;
  std::vector<std::string> lines;  // rank 0's
  int64_t other_lines = 0;         // printed by the other ranks
};

// Runs fn(comm) on `world` simulated ranks; with fail_at >= 0, the last
// rank fails at that collective of its own (as if its process died).
Outcome RunSim(int world,
               const std::function<absl::Status(comm::Communicator&)>& fn,
               int64_t fail_at = -1) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  if (fail_at >= 0) options.faults = {sim::Fault::FailAt(world - 1, fail_at)};
  sim::RunResult r = sim::Run(
      world, [&](int, comm::Communicator& comm) { return fn(comm); }, options);
  Outcome out{r.status(), capture.Lines(0)};
  for (int rank = 1; rank < world; ++rank) {
    out.other_lines += static_cast<int64_t>(capture.Lines(rank).size());
  }
  return out;
}

using RunFn = std::function<absl::Status(comm::Communicator&)>;

std::string FileBytes(const std::string& path) {
  absl::StatusOr<std::string> b = checkpoint::ReadFile(path);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : "";
}

// The checkpoint's two files, bytes.
std::vector<std::string> CheckpointBytes(const std::string& dir) {
  return {FileBytes(dir + "/" + checkpoint::kModelFile),
          FileBytes(dir + "/" + checkpoint::kTrainingStateFile)};
}

// The saved progress in `dir` ("epoch/step_in_epoch").
std::string Progress(const std::string& dir) {
  absl::StatusOr<checkpoint::SafetensorsContent> c =
      checkpoint::LoadSafetensors(dir + "/" + checkpoint::kTrainingStateFile);
  if (!c.ok()) return c.status().ToString();
  return c->metadata["epoch"] + "/" + c->metadata["step_in_epoch"];
}

RunFn Toy(ToyDdpConfig config, std::string dir = "") {
  return [config, dir](comm::Communicator& comm) {
    ToyDdpConfig c = config;
    c.checkpoint.dir = dir;
    return RunToyDdp(comm, c);
  };
}

RunFn Digits(DigitsConfig config, std::string dir = "") {
  return [config, dir](comm::Communicator& comm) {
    DigitsConfig c = config;
    c.checkpoint.dir = dir;
    return RunDigitsDdp(comm, c).status();
  };
}

// The loss each "[GPUk] Epoch: ..." line prints, in order.
std::vector<double> PrintedLosses(const std::vector<std::string>& lines) {
  std::vector<double> out;
  for (const std::string& line : lines) {
    const size_t at = line.find("Loss: ");
    double v = 0;
    if (at != std::string::npos && absl::SimpleAtod(line.substr(at + 6), &v)) {
      out.push_back(v);
    }
  }
  return out;
}

// `make(dir)` on each of `worlds` (the first 1): the same lines from rank 0
// alone, the same checkpoint bytes. Returns the first world's lines.
std::vector<std::string> ExpectSameAtEveryWorldSize(
    const std::string& name, const std::vector<int>& worlds,
    const std::function<RunFn(const std::string&)>& make,
    const std::function<std::string(const std::string&)>& normalise = nullptr) {
  Outcome base;
  std::vector<std::string> base_bytes;
  for (int w : worlds) {
    SCOPED_TRACE(w);
    const std::string dir = TestDir(name + "_w" + std::to_string(w));
    Outcome o = RunSim(w, make(dir));
    EXPECT_TRUE(o.status.ok()) << o.status;
    EXPECT_EQ(o.other_lines, 0);
    if (normalise) {
      for (std::string& line : o.lines) line = normalise(line);
    }
    const std::vector<std::string> bytes = CheckpointBytes(dir);
    if (w == worlds[0]) {
      base = o;
      base_bytes = bytes;
      continue;
    }
    EXPECT_EQ(o.lines, base.lines);
    EXPECT_EQ(bytes, base_bytes);
  }
  return base.lines;
}

TEST(VirtualWorldTest, ToyDdpPrintsAndSavesTheSameAtEveryWorldSize) {
  ToyDdpConfig config;
  config.virtual_world = 4;
  config.loss_precision = 17;
  const std::vector<std::string> lines = ExpectSameAtEveryWorldSize(
      "toy", {1, 2, 4},
      [&](const std::string& dir) { return Toy(config, dir); });
  // 3 epochs x 4 virtual ranks, then each one's two accuracies.
  ASSERT_EQ(lines.size(), 20u);
  EXPECT_THAT(lines[3], HasSubstr("[GPU3] Epoch: 001/003"));
  EXPECT_EQ(lines[19], "[GPU3] Test accuracy 1.0");
}

// At W = K the virtual world is DDP at K with the tree in place of the
// engine's all-reduce order: the losses agree with plain DDP at 4 ranks
// (whose lines equal PyTorch's, bench/peers/compare_toy_ddp.py) to float
// rounding. The tolerance: 4-term f32 sums differ by a few ulps (~1e-7
// relative) per gradient element; three SGD steps of lr 0.5 keep it well
// under 1e-5.
TEST(VirtualWorldTest, ToyDdpAtWEqualsKMatchesPlainDdpToRounding) {
  ToyDdpConfig config;
  config.loss_precision = 17;
  Outcome plain = RunSim(4, Toy(config));
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  config.virtual_world = 4;
  Outcome virt = RunSim(4, Toy(config));
  ASSERT_TRUE(virt.status.ok()) << virt.status;
  // Plain DDP prints on every rank; rank 0's lines are virtual rank 0's.
  std::vector<double> mine = PrintedLosses(plain.lines);
  std::vector<double> theirs;
  for (const std::string& line : virt.lines) {
    if (line.rfind("[GPU0] Epoch", 0) == 0) {
      theirs.push_back(PrintedLosses({line})[0]);
    }
  }
  ASSERT_EQ(mine.size(), 3u);
  ASSERT_EQ(theirs.size(), 3u);
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_NEAR(theirs[i], mine[i], 1e-5 * std::abs(mine[i])) << i;
  }
}

TEST(VirtualWorldTest, DdpDemoPrintsAndSavesTheSameAtEveryWorldSize) {
  DdpDemoConfig config;
  config.epochs = 2;
  config.virtual_world = 4;
  config.batchSize = 16;  // 32 images per virtual rank: 2 steps an epoch
  const std::vector<std::string> lines = ExpectSameAtEveryWorldSize(
      "demo", {1, 2, 4}, [&](const std::string& dir) {
        return [config, dir](comm::Communicator& comm) {
          DdpDemoConfig c = config;
          c.checkpoint.dir = dir;
          return RunDdpDemo(comm, c);
        };
      });
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[0], HasSubstr("Step: 0, Loss: "));
  EXPECT_EQ(lines[5], "Epoch 1 Finished !");
}

// The GradScaler under the virtual world: virtual rank 2's inf at step 3
// skips the step on every rank and halves the scale, at every W.
TEST(VirtualWorldTest, AmpDdpSkipsAndScalesTheSameAtEveryWorldSize) {
  AmpDdpConfig config;
  config.steps = 6;
  config.virtual_world = 4;
  config.inject_inf = "2:3";
  const std::vector<std::string> lines =
      ExpectSameAtEveryWorldSize("amp", {1, 2, 4}, [&](const std::string& dir) {
        return [config, dir](comm::Communicator& comm) {
          AmpDdpConfig c = config;
          c.checkpoint.dir = dir;
          return RunAmpDdp(comm, c);
        };
      });
  ASSERT_EQ(lines.size(), 28u);  // 6 steps x 4, then 4 checksums
  EXPECT_THAT(lines[12], HasSubstr("[GPU0] step 003"));
  EXPECT_THAT(lines[12], HasSubstr("scale 65536 | skipped"));
  EXPECT_THAT(lines[16], HasSubstr("scale 32768 | stepped"));
}

// BatchNorm's running statistics are virtual rank 0's at every W, and the
// random crops and flips are keyed by the virtual rank: resnet_ddp's lines
// (its throughput aside) and checkpoints are the same at W = 1, 2, 4.
TEST(VirtualWorldTest, ResnetDdpPrintsAndSavesTheSameAtEveryWorldSize) {
  ResnetConfig config;
  config.virtual_world = 4;
  config.synthetic_size = 40;  // 36 to train: 2 steps of 4 per virtual rank
  config.image_size = 8;
  config.batch_size = 4;
  config.epochs = 1;
  config.print_step_losses = true;
  const std::vector<std::string> lines = ExpectSameAtEveryWorldSize(
      "resnet", {1, 2, 4},
      [&](const std::string& dir) -> RunFn {
        return [config, dir](comm::Communicator& comm) {
          ResnetConfig c = config;
          c.checkpoint.dir = dir;
          return RunResnetDdp(comm, c).status();
        };
      },
      [](const std::string& line) {
        return line.substr(0, line.find(" images/s") == std::string::npos
                                  ? line.size()
                                  : line.rfind(" | "));
      });
  ASSERT_EQ(lines.size(), 10u);  // header, 2 steps x 4, the epoch's line
  EXPECT_THAT(lines[0], HasSubstr("resnet18, 4 virtual ranks"));
  EXPECT_THAT(lines[8], HasSubstr("[GPU3] step 1 loss "));
}

// A tiny GPT with dropout, AdamW, clipping, accumulation and a validation
// loss: the same lines (throughput aside) and bytes at W = 1, 2, 4; fsdp on
// four ranks and zero2 on two print DDP's lines and train its weights (the
// optimizer state's layout in the file is gpt_ddp's per mode).
GptDdpConfig TinyGpt() {
  GptDdpConfig c = TinyGptDdpConfig();
  c.batch_size = 2;
  c.eval_blocks = 8;
  c.virtual_world = 4;
  return c;
}

RunFn Gpt(const GptDdpConfig& config, const std::string& dir) {
  return [config, dir](comm::Communicator& comm) -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(TokenBlocks data,
                            LoadByteCorpus(kTestCorpus, config.block_size,
                                           config.model.vocab_size));
    GptDdpConfig c = config;
    c.checkpoint.dir = dir;
    return RunGptDdp(comm, c, data).status();
  };
}

std::string WithoutThroughput(const std::string& line) {
  const size_t at = line.find(" | tokens/s");
  return at == std::string::npos ? line : line.substr(0, at);
}

TEST(VirtualWorldTest, GptDdpPrintsAndSavesTheSameAtEveryWorldSize) {
  GptDdpConfig config = TinyGpt();
  const std::vector<std::string> lines = ExpectSameAtEveryWorldSize(
      "gpt", {1, 2, 4},
      [&](const std::string& dir) { return Gpt(config, dir); },
      WithoutThroughput);
  ASSERT_EQ(lines.size(), 9u);  // header, 6 steps, 2 validations
  EXPECT_THAT(lines[0], HasSubstr("4 virtual ranks"));
  EXPECT_THAT(lines[4], HasSubstr("step 3 | val loss "));
  for (auto [mode, world] : {std::pair{"fsdp", 4}, std::pair{"zero2", 2}}) {
    SCOPED_TRACE(mode);
    config.parallel = mode;
    const std::string dir = TestDir(std::string("gpt_") + mode);
    Outcome o = RunSim(world, Gpt(config, dir));
    ASSERT_TRUE(o.status.ok()) << o.status;
    ASSERT_EQ(o.lines.size(), lines.size());
    for (size_t i = 1; i < lines.size(); ++i) {
      EXPECT_EQ(WithoutThroughput(o.lines[i]), lines[i]);
    }
    // The weights' file, its checkpoint id aside (which hashes the run's
    // flags, --parallel among them).
    absl::StatusOr<checkpoint::SafetensorsContent> mine =
        checkpoint::LoadSafetensors(dir + "/" + checkpoint::kModelFile);
    // DDP on one rank wrote gpt_w1 above.
    absl::StatusOr<checkpoint::SafetensorsContent> ddp =
        checkpoint::LoadSafetensors(std::string(std::getenv("TEST_TMPDIR")) +
                                    "/gpt_w1/" + checkpoint::kModelFile);
    ASSERT_TRUE(mine.ok()) << mine.status();
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    ASSERT_EQ(mine->tensors.size(), ddp->tensors.size());
    for (size_t t = 0; t < mine->tensors.size(); ++t) {
      EXPECT_EQ(mine->tensors[t].name, ddp->tensors[t].name);
      EXPECT_EQ(mine->tensors[t].tensor.ToVector<float>().value(),
                ddp->tensors[t].tensor.ToVector<float>().value())
          << mine->tensors[t].name;
    }
  }
}

// gpt_ddp is positioned by its global step: stopped after 3 steps at W = 4
// and resumed at W = 2, it ends with an uninterrupted run's bytes.
TEST(VirtualWorldTest, GptDdpStoppedAtFourRanksResumesAtTwoBitForBit) {
  GptDdpConfig config = TinyGpt();
  config.checkpoint.every_steps = 1;
  const std::string straight = TestDir("gpt_straight");
  ASSERT_TRUE(RunSim(1, Gpt(config, straight)).status.ok());
  const std::string stopped = TestDir("gpt_stopped");
  config.stop_after = 3;
  ASSERT_TRUE(RunSim(4, Gpt(config, stopped)).status.ok());
  config.stop_after = 0;
  Outcome resumed = RunSim(2, Gpt(config, stopped));
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_THAT(resumed.lines[0], HasSubstr("resuming from " + stopped));
  EXPECT_EQ(CheckpointBytes(stopped), CheckpointBytes(straight));
}

TEST(VirtualWorldTest, DigitsDdpPrintsAndSavesTheSameAtEveryWorldSize) {
  DigitsConfig config;
  config.epochs = 2;
  config.virtual_world = 8;
  config.checkpoint.every_steps = 7;
  const std::vector<std::string> lines = ExpectSameAtEveryWorldSize(
      "digits", {1, 2, 4, 8},
      [&](const std::string& dir) { return Digits(config, dir); });
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("8 virtual ranks, batch 8 per rank"));
}

// Mixing modes: DDP on one rank, zero1 on two, zero2 on four and fsdp on
// four and two write the same checkpoint bytes and print the same losses
// and accuracy.
TEST(VirtualWorldTest, DigitsShardedModesWriteDdpsBytes) {
  DigitsConfig config;
  config.epochs = 2;
  config.virtual_world = 4;
  const std::string ddp_dir = TestDir("digits_mode_none");
  Outcome ddp = RunSim(1, Digits(config, ddp_dir));
  ASSERT_TRUE(ddp.status.ok()) << ddp.status;
  for (auto [mode, world] : {std::pair{"zero1", 2}, std::pair{"zero2", 4},
                             std::pair{"fsdp", 4}, std::pair{"fsdp", 2}}) {
    SCOPED_TRACE(mode);
    config.shard = mode;
    const std::string dir = TestDir(std::string("digits_mode_") + mode);
    Outcome o = RunSim(world, Digits(config, dir));
    ASSERT_TRUE(o.status.ok()) << o.status;
    ASSERT_EQ(o.lines.size(), ddp.lines.size());
    EXPECT_THAT(o.lines[0], HasSubstr(std::string("--shard=") + mode));
    EXPECT_EQ(std::vector<std::string>(o.lines.begin() + 1, o.lines.end()),
              std::vector<std::string>(ddp.lines.begin() + 1, ddp.lines.end()));
    EXPECT_EQ(CheckpointBytes(dir), CheckpointBytes(ddp_dir));
  }
}

TEST(VirtualWorldTest, DigitsKilledAtFourRanksResumesAtTwoBitForBit) {
  DigitsConfig config;
  config.epochs = 2;
  config.virtual_world = 4;
  config.checkpoint.every_steps = 5;
  const std::string straight = TestDir("digits_straight");
  Outcome a = RunSim(1, Digits(config, straight));
  ASSERT_TRUE(a.status.ok()) << a.status;

  const std::string killed = TestDir("digits_killed");
  Outcome b = RunSim(4, Digits(config, killed), /*fail_at=*/kDigitsFailAt);
  ASSERT_FALSE(b.status.ok());
  EXPECT_THAT(b.status.ToString(), HasSubstr("injected fault"));
  EXPECT_EQ(Progress(killed), "1/7") << "not killed mid-epoch 2";

  Outcome c = RunSim(2, Digits(config, killed));
  ASSERT_TRUE(c.status.ok()) << c.status;
  ASSERT_FALSE(c.lines.empty());
  EXPECT_THAT(c.lines[0],
              HasSubstr("resuming from " + killed + " at epoch 2, step 8"));
  // The resumed epoch's line and the test accuracy: the uninterrupted run's.
  ASSERT_GE(a.lines.size(), 2u);
  ASSERT_GE(c.lines.size(), 2u);
  EXPECT_EQ(std::vector<std::string>(c.lines.end() - 2, c.lines.end()),
            std::vector<std::string>(a.lines.end() - 2, a.lines.end()));
  EXPECT_EQ(CheckpointBytes(killed), CheckpointBytes(straight));
}

TEST(VirtualWorldTest, BadCombinationsAreRefusedBeforeTraining) {
  ToyDdpConfig toy;
  toy.virtual_world = 4;
  Outcome three = RunSim(3, Toy(toy));
  EXPECT_EQ(three.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(three.status.message(),
              HasSubstr("--virtual_world=4 at 3 ranks"));
  EXPECT_THAT(three.status.message(), HasSubstr("use 1, 2 or 4 ranks"));
  EXPECT_TRUE(three.lines.empty());

  DigitsConfig digits;
  digits.epochs = 1;
  digits.virtual_world = 3;
  Outcome batch = RunSim(1, Digits(digits));
  EXPECT_THAT(batch.status.message(),
              HasSubstr("--global_batch_size=64 is not divisible by "
                        "--virtual_world=3 virtual ranks; use 63 or 66"));

  AmpDdpConfig amp;
  amp.virtual_world = 2;
  amp.comm_hook = "bf16_compress";
  Outcome hook = RunSim(
      2, [amp](comm::Communicator& comm) { return RunAmpDdp(comm, amp); });
  EXPECT_EQ(hook.status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(hook.status.message(), HasSubstr("use --comm_hook=allreduce"));

  ResnetConfig resnet;
  resnet.virtual_world = 2;
  resnet.sync_bn = true;
  resnet.synthetic_size = 40;
  resnet.image_size = 8;
  resnet.batch_size = 4;
  Outcome sync = RunSim(2, [resnet](comm::Communicator& comm) {
    return RunResnetDdp(comm, resnet).status();
  });
  EXPECT_EQ(sync.status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(sync.status.message(), HasSubstr("has a SyncBatchNorm"));

  // Ranks started with different K: every rank refuses, naming each value.
  Outcome differ = RunSim(2, [](comm::Communicator& comm) {
    ToyDdpConfig c;
    c.virtual_world = comm.rank() == 0 ? 2 : 4;
    return RunToyDdp(comm, c);
  });
  EXPECT_THAT(differ.status.message(),
              HasSubstr("--virtual_world is 2 on rank 0 and 4 on rank 1"));
}

TEST(VirtualWorldTest, ACheckpointResumesOnlyInItsOwnMode) {
  ToyDdpConfig config;
  config.epochs = 1;
  const std::string plain = TestDir("toy_plain");
  ASSERT_TRUE(RunSim(2, Toy(config, plain)).status.ok());
  const std::vector<std::string> plain_bytes = CheckpointBytes(plain);
  config.epochs = 2;
  config.virtual_world = 2;
  Outcome into_virtual = RunSim(2, Toy(config, plain));
  EXPECT_EQ(into_virtual.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(into_virtual.status.message(),
              HasSubstr("--virtual_world is 0 there and 2 here"));
  EXPECT_EQ(CheckpointBytes(plain), plain_bytes);  // nothing written

  config.epochs = 1;
  const std::string virt = TestDir("toy_virtual");
  ASSERT_TRUE(RunSim(1, Toy(config, virt)).status.ok());
  const std::vector<std::string> virt_bytes = CheckpointBytes(virt);
  config.epochs = 2;
  config.virtual_world = 0;
  Outcome into_plain = RunSim(2, Toy(config, virt));
  EXPECT_THAT(into_plain.status.message(),
              HasSubstr("--virtual_world is 2 there and 0 here"));
  EXPECT_EQ(CheckpointBytes(virt), virt_bytes);
}

}  // namespace
}  // namespace tandem::train
