// RunCheckpointer on the simulated cluster. Each rank is given its own
// folder where a test needs ranks that see different files (ranks are
// threads of one process, which otherwise share every folder).
#include "train/checkpoint/run_checkpointer.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/optim/sgd.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/training_checkpoint.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

// A one-layer model and its Sgd, the same on every rank.
struct Model {
  Generator gen{5};
  std::unique_ptr<nn::Sequential> seq = std::make_unique<nn::Sequential>();
  std::unique_ptr<optim::Sgd> sgd;
  Model() {
    EXPECT_TRUE(seq->Append(nn::Linear::Create(3, 2, gen)).ok());
    sgd = std::make_unique<optim::Sgd>(
        *optim::Sgd::Create(seq->Parameters(), 0.1, {.momentum = 0.9}));
  }
  TrainingState State() {
    TrainingState s;
    s.model = seq.get();
    s.optimizer = sgd.get();
    return s;
  }
};

// Saves a checkpoint of world size 2 at global step `step` into `dir`.
void SaveAt(const std::string& dir, int64_t step) {
  Model m;
  TrainingProgress p;
  p.epoch = step;
  p.global_step = step;
  p.world_size = 2;
  ASSERT_TRUE(SaveTrainingCheckpoint(dir, m.State(), p).ok());
}

// Runs Resume on 2 ranks, rank r reading dirs[r]; returns each rank's
// status and the epochs they would start from.
std::vector<absl::Status> ResumeOnTwoRanks(const std::vector<std::string>& dirs,
                                           std::vector<int64_t>* epochs) {
  epochs->assign(2, -1);
  sim::RunResult result = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    Model m;
    TrainingState state = m.State();
    RunCheckpointer ckpt({.dir = dirs[rank]}, comm, Device::CPU(), "test");
    absl::StatusOr<TrainingProgress> start = ckpt.Resume(state);
    if (!start.ok()) return start.status();
    (*epochs)[rank] = start->epoch;
    return absl::OkStatus();
  });
  EXPECT_TRUE(result.launch.ok()) << result.launch;
  return result.ranks;
}

TEST(RunCheckpointerTest, RanksOfOneFolderResumeTogether) {
  const std::string dir = TestDir("shared");
  SaveAt(dir, 3);
  std::vector<int64_t> epochs;
  for (const absl::Status& s : ResumeOnTwoRanks({dir, dir}, &epochs)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(epochs, (std::vector<int64_t>{3, 3}));
}

// Issue 25: rank 1 on a node whose --checkpoint_dir is an empty folder.
// Before, rank 0 resumed at epoch 3 and rank 1 started at epoch 1, and they
// trained together; now every rank refuses, naming each rank's view, and
// rank 0's checkpoint is left as it was.
TEST(RunCheckpointerTest, RankThatSeesAnEmptyFolderStopsEveryRank) {
  const std::string good = TestDir("good");
  const std::string empty = TestDir("empty");
  SaveAt(good, 3);
  const std::string model_before = *ReadFile(good + "/" + kModelFile);
  absl::StatusOr<SafetensorsContent> saved =
      LoadSafetensors(good + "/" + kModelFile);
  ASSERT_TRUE(saved.ok());
  const std::string id = saved->metadata.at("tandem.checkpoint");
  std::vector<int64_t> epochs;
  for (const absl::Status& s : ResumeOnTwoRanks({good, empty}, &epochs)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(),
                HasSubstr("test: ranks found different checkpoints in "
                          "--checkpoint_dir"));
    EXPECT_THAT(s.message(), HasSubstr(good + ": step 3, checkpoint " + id +
                                       " on rank 0 and " + empty +
                                       ": no checkpoint on rank 1"));
  }
  EXPECT_EQ(epochs, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(*ReadFile(good + "/" + kModelFile), model_before);
}

// The same step in both folders, but not the same files (another run's
// checkpoint): the ids differ, and the ranks refuse.
TEST(RunCheckpointerTest, SameStepOtherFilesStopsEveryRank) {
  const std::string a = TestDir("a");
  const std::string b = TestDir("b");
  SaveAt(a, 3);
  {
    Model m;
    // The same weights, another saved learning rate.
    ASSERT_TRUE(m.sgd->set_lr(0.25).ok());
    TrainingProgress p;
    p.epoch = 3;
    p.global_step = 3;
    p.world_size = 2;
    ASSERT_TRUE(SaveTrainingCheckpoint(b, m.State(), p).ok());
  }
  std::vector<int64_t> epochs;
  for (const absl::Status& s : ResumeOnTwoRanks({a, b}, &epochs)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr(": step 3, checkpoint "));
    EXPECT_THAT(s.message(), HasSubstr("on rank 0 and " + b + ": step 3"));
  }
}

// A rank whose load fails says why in its view; the others wait for it in
// the agreement (not until the timeout) and refuse too.
TEST(RunCheckpointerTest, RankWhoseLoadFailsStopsEveryRank) {
  const std::string good = TestDir("good2");
  const std::string torn = TestDir("torn");
  SaveAt(good, 1);
  SaveAt(torn, 1);
  std::remove((torn + "/" + kModelFile).c_str());
  std::vector<int64_t> epochs;
  for (const absl::Status& s : ResumeOnTwoRanks({good, torn}, &epochs)) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr(torn + ": cannot load ("));
    EXPECT_THAT(s.message(), HasSubstr("is torn"));
  }
}

// Ranks that fail to load alike (one shared folder) each return that error,
// not a report that they found different checkpoints.
TEST(RunCheckpointerTest, RanksFailingAlikeReturnTheLoadError) {
  const std::string dir = TestDir("alike");
  SaveAt(dir, 1);
  // Overwritten by a run of another model (Linear 3 -> 5), same world size.
  {
    Generator gen(1);
    auto seq = std::make_unique<nn::Sequential>();
    ASSERT_TRUE(seq->Append(nn::Linear::Create(3, 5, gen)).ok());
    auto sgd = *optim::Sgd::Create(seq->Parameters(), 0.1, {.momentum = 0.9});
    TrainingState s;
    s.model = seq.get();
    s.optimizer = &sgd;
    TrainingProgress p;
    p.global_step = 2;
    p.world_size = 2;
    ASSERT_TRUE(SaveTrainingCheckpoint(dir, s, p).ok());
  }
  std::vector<int64_t> epochs;
  for (const absl::Status& s : ResumeOnTwoRanks({dir, dir}, &epochs)) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()),
                ::testing::Not(HasSubstr("ranks found different checkpoints")))
        << s;
  }
}

// Issue 39: a second run on a folder another run holds is refused on rank 0
// before anything is read, naming the holder; the other rank stops with it.
TEST(RunCheckpointerTest, AFolderInUseIsRefused) {
  const std::string dir = TestDir("in_use");
  SaveAt(dir, 1);
  absl::StatusOr<FolderLock> held = FolderLock::Acquire(dir, "holder");
  ASSERT_TRUE(held.ok()) << held.status();
  std::vector<int64_t> epochs;
  const std::vector<absl::Status> ranks = ResumeOnTwoRanks({dir, dir}, &epochs);
  EXPECT_EQ(ranks[0].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(ranks[0].message()),
              HasSubstr("test: --checkpoint_dir=" + dir +
                        " is in use by another run (pid "));
  EXPECT_FALSE(ranks[1].ok());
  EXPECT_EQ(epochs, (std::vector<int64_t>{-1, -1}));
}

}  // namespace
}  // namespace tandem::train::checkpoint
