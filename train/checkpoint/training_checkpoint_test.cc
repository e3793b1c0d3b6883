#include "train/checkpoint/training_checkpoint.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/param_groups.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/param_groups_metadata.h"
#include "train/checkpoint/safetensors.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

TrainingProgress Progress(int64_t epoch, int64_t step, int64_t global_step,
                          int64_t world_size) {
  TrainingProgress p;
  p.epoch = epoch;
  p.step_in_epoch = step;
  p.global_step = global_step;
  p.world_size = world_size;
  return p;
}

// `n` steps of `opt`, with gradients drawn from `gen`.
void StepsWithRandomGrads(nn::Module& model, Generator& gen,
                          optim::Optimizer& opt, int n) {
  for (int i = 0; i < n; ++i) {
    for (const Tensor& p : model.Parameters()) {
      std::vector<float> g(static_cast<size_t>(p.numel()));
      gen.Uniform(g.data(), p.numel(), -1.f, 1.f);
      ASSERT_TRUE(p.set_grad(*Tensor::FromVector<float>(g, p.shape())).ok());
    }
    ASSERT_TRUE(opt.Step().ok());
  }
}

// A model, an Sgd with momentum and a generator, all from `seed`; `steps`
// steps taken with gradients drawn from the generator.
struct Trainer {
  std::unique_ptr<nn::Sequential> model = std::make_unique<nn::Sequential>();
  std::unique_ptr<optim::Sgd> sgd;
  Generator gen;

  explicit Trainer(uint64_t seed, int64_t out = 2) : gen(seed) {
    EXPECT_TRUE(model->Append(nn::Linear::Create(3, out, gen)).ok());
    optim::SgdOptions o;
    o.momentum = 0.9;
    sgd = std::make_unique<optim::Sgd>(
        *optim::Sgd::Create(model->Parameters(), 0.1, o));
  }
  void Steps(int n) { StepsWithRandomGrads(*model, gen, *sgd, n); }
  TrainingState State() {
    TrainingState state;
    state.model = model.get();
    state.optimizer = sgd.get();
    state.generators = {{"data", &gen}};
    return state;
  }
  std::vector<std::vector<float>> Weights() const {
    std::vector<std::vector<float>> out;
    for (const Tensor& p : model->Parameters()) {
      out.push_back(*p.ToVector<float>());
    }
    return out;
  }
};

TEST(TrainingCheckpointTest, NoCheckpointIsNullopt) {
  Trainer run(1);
  TrainingState state = run.State();
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(TestDir("none"), state, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
}

// Issue 39: a resume of another run (another seed, batch size, data) is
// refused before anything loads, naming each difference.
TEST(TrainingCheckpointTest, WhatAResumeMustMatchIsComparedBeforeLoading) {
  const std::string dir = TestDir("must_match");
  Trainer saved(1);
  saved.Steps(2);
  TrainingState state = saved.State();
  state.must_match = {{"the program", "toy"}, {"--seed", "1"}, {"--lr", "0.1"}};
  ASSERT_TRUE(SaveTrainingCheckpoint(dir, state, Progress(0, 2, 2, 1)).ok());

  Trainer other(9);
  const std::vector<std::vector<float>> before = other.Weights();
  TrainingState load = other.State();
  load.must_match = {{"the program", "toy"},
                     {"--seed", "9"},
                     {"--lr", "0.1"},
                     {"--new_flag", "x"}};
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(dir, load, 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("checkpoint in " + dir +
                        " was written by another run: --seed is 1 there and 9 "
                        "here; --new_flag is (not recorded) there and x here. "
                        "A resume continues that run exactly"));
  EXPECT_EQ(other.Weights(), before);  // nothing was loaded

  // Another program: only that is named.
  load.must_match = {{"the program", "digits"}, {"--seed", "9"}};
  r = LoadTrainingCheckpoint(dir, load, 1);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("another run: the program is toy there and digits "
                        "here. A resume"));

  // The same values: it loads.
  load.must_match = state.must_match;
  r = LoadTrainingCheckpoint(dir, load, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(other.Weights(), saved.Weights());

  // A checkpoint that records nothing (written before tandem recorded it)
  // is not compared.
  const std::string old = TestDir("must_match_old");
  ASSERT_TRUE(
      SaveTrainingCheckpoint(old, saved.State(), Progress(0, 2, 2, 1)).ok());
  load.must_match = {{"--seed", "9"}};
  EXPECT_TRUE(LoadTrainingCheckpoint(old, load, 1).ok());
}

TEST(TrainingCheckpointTest, ResumeContinuesBitForBit) {
  Trainer straight(7);
  straight.Steps(5);

  const std::string dir = TestDir("resume");
  Trainer first(7);
  first.Steps(2);
  TrainingState saved = first.State();
  saved.extra = {{"scaler.scale", "65536"}};
  ASSERT_TRUE(SaveTrainingCheckpoint(dir, saved, Progress(1, 3, 2, 4)).ok());
  EXPECT_TRUE(HasTrainingCheckpoint(dir));

  Trainer resumed(99);  // other weights, no momentum yet, another stream
  TrainingState state = resumed.State();
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(dir, state, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->epoch, 1);
  EXPECT_EQ((*r)->step_in_epoch, 3);
  EXPECT_EQ((*r)->global_step, 2);
  EXPECT_EQ(state.extra, (Metadata{{"scaler.scale", "65536"}}));
  EXPECT_EQ(resumed.Weights(), first.Weights());
  resumed.Steps(3);
  EXPECT_EQ(resumed.Weights(), straight.Weights());
  EXPECT_EQ(resumed.gen.Random(), straight.gen.Random());
}

// Two AdamW groups (nanoGPT's split): the saved param_groups restore every
// group's lr and options over what the resumed optimizer was built with,
// and the run continues bit for bit.
struct GroupedTrainer {
  std::unique_ptr<nn::Sequential> model = std::make_unique<nn::Sequential>();
  std::unique_ptr<optim::AdamW> adam;
  Generator gen;

  GroupedTrainer(uint64_t seed, double decay, double lr) : gen(seed) {
    EXPECT_TRUE(model->Append(nn::Linear::Create(3, 2, gen)).ok());
    adam = std::make_unique<optim::AdamW>(*optim::AdamW::Create(
        optim::WeightDecayGroups(model->NamedParameters(), decay), {.lr = lr}));
  }
  void Steps(int n) { StepsWithRandomGrads(*model, gen, *adam, n); }
  TrainingState State() {
    TrainingState state;
    state.model = model.get();
    state.optimizer = adam.get();
    state.generators = {{"data", &gen}};
    return state;
  }
};

TEST(TrainingCheckpointTest, ParamGroupsAreSavedAndRestored) {
  GroupedTrainer straight(7, 0.1, 0.01);
  ASSERT_TRUE(straight.adam->set_lr(1, 0.003).ok());  // a schedule's work
  straight.Steps(4);

  const std::string dir = TestDir("groups");
  GroupedTrainer first(7, 0.1, 0.01);
  ASSERT_TRUE(first.adam->set_lr(1, 0.003).ok());
  first.Steps(2);
  ASSERT_TRUE(SaveTrainingCheckpoint(dir, first.State(), {}).ok());
  SafetensorsContent file =
      *LoadSafetensors(dir + "/" + std::string(kTrainingStateFile));
  EXPECT_EQ(file.metadata.at("optimizer.param_groups"), "2");
  EXPECT_EQ(file.metadata.at("optimizer.param_groups.0.params"), "0");
  EXPECT_EQ(file.metadata.at("optimizer.param_groups.1.params"), "1");
  EXPECT_EQ(file.metadata.at("optimizer.param_groups.0.weight_decay"),
            "0.10000000000000001");

  GroupedTrainer resumed(99, 0.5, 0.2);  // other groups' options
  TrainingState state = resumed.State();
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(dir, state, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(resumed.adam->lr(0), 0.01);
  EXPECT_EQ(resumed.adam->lr(1), 0.003);
  EXPECT_EQ(resumed.adam->group_options(0).weight_decay, 0.1);
  EXPECT_EQ(resumed.adam->group_options(1).weight_decay, 0.0);
  resumed.Steps(2);
  std::vector<Tensor> a = resumed.model->Parameters();
  std::vector<Tensor> b = straight.model->Parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(*a[i].ToVector<float>(), *b[i].ToVector<float>());
  }

  // An AdamW with one group takes the per-parameter state but not the
  // groups: refused, and its state is put back (all or nothing).
  GroupedTrainer one_group(5, 0.1, 0.01);
  one_group.adam = std::make_unique<optim::AdamW>(
      *optim::AdamW::Create(one_group.model->Parameters(), {.lr = 0.02}));
  one_group.Steps(1);
  const std::vector<float> moment =
      *one_group.adam->exp_avg(0).ToVector<float>();
  TrainingState other = one_group.State();
  absl::StatusOr<std::optional<TrainingProgress>> refused =
      LoadTrainingCheckpoint(dir, other, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("2 parameter group(s) but the optimizer has 1"));
  EXPECT_EQ(*one_group.adam->exp_avg(0).ToVector<float>(), moment);
  EXPECT_EQ(one_group.adam->step_count(0), 1);
  EXPECT_EQ(one_group.adam->lr(), 0.02);
}

TEST(ParamGroupsMetadataTest, RoundTripIsExactAndOlderFilesHaveNone) {
  std::vector<optim::ParamGroupState> groups(2);
  groups[0].params = {0, 2};
  groups[0].options = {{"lr", 6e-4}, {"weight_decay", 1.0 / 3}};
  groups[1].options = {{"lr", 0.1}};  // an empty group
  Metadata meta;
  AddParamGroupsMetadata(groups, meta);
  absl::StatusOr<std::optional<std::vector<optim::ParamGroupState>>> back =
      ReadParamGroupsMetadata(meta, "f");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  ASSERT_EQ((*back)->size(), 2u);
  EXPECT_EQ((**back)[0].params, groups[0].params);
  EXPECT_EQ((**back)[0].options, groups[0].options);
  EXPECT_TRUE((**back)[1].params.empty());
  EXPECT_EQ((**back)[1].options, groups[1].options);

  EXPECT_FALSE(ReadParamGroupsMetadata({{"epoch", "1"}}, "f")->has_value());
  meta["optimizer.param_groups.0.params"] = "0,x";
  EXPECT_THAT(ReadParamGroupsMetadata(meta, "f").status().message(),
              HasSubstr("parameter indices"));
  meta.erase("optimizer.param_groups.0.params");
  meta["optimizer.param_groups.2.lr"] = "0.1";
  EXPECT_THAT(ReadParamGroupsMetadata(meta, "f").status().message(),
              HasSubstr("below the count"));
}

TEST(TrainingCheckpointTest, ModelFileIsAPlainStateDict) {
  const std::string dir = TestDir("plain");
  Trainer run(3);
  run.Steps(1);
  ASSERT_TRUE(SaveTrainingCheckpoint(dir, run.State(), {}).ok());
  absl::StatusOr<SafetensorsContent> model =
      LoadSafetensors(dir + "/" + kModelFile);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->tensors.size(), 2u);
  EXPECT_EQ(model->tensors[0].name, "0.weight");
  EXPECT_EQ(model->metadata.at("format"), "pt");
  absl::StatusOr<SafetensorsContent> st =
      LoadSafetensors(dir + "/" + kTrainingStateFile);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->tensors[0].name, "optimizer.0.momentum_buffer");
  // Both files carry the pair's id: 16 hex digits per file's content hash.
  const std::string id = model->metadata.at("tandem.checkpoint");
  EXPECT_EQ(id.size(), 33u);
  EXPECT_EQ(st->metadata.at("tandem.checkpoint"), id);
  Trainer fresh(99);
  TrainingState state = fresh.State();
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(dir, state, 1);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status();
  EXPECT_EQ((*r)->checkpoint_id, id);
}

// A save killed at each point of its two-phase commit leaves a folder that
// loads: the previous checkpoint before both new files are written, the new
// one after. The folders are built from two real saves, renamed as a kill at
// that point would leave them.
class KilledSaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    const std::string later = dir_ + "-later";
    Trainer run(11);
    run.Steps(1);
    ASSERT_TRUE(
        SaveTrainingCheckpoint(dir_, run.State(), Progress(0, 1, 1, 1)).ok());
    after_one_ = run.Weights();
    run.Steps(1);
    ASSERT_TRUE(
        SaveTrainingCheckpoint(later, run.State(), Progress(0, 2, 2, 1)).ok());
    after_two_ = run.Weights();
    for (const char* f : {kModelFile, kTrainingStateFile}) {
      later_[f] = *ReadFile(later + "/" + f);
    }
  }
  // Puts step 2's `file` into the folder under `name` (as a save would).
  void Put(const char* file, const std::string& name) {
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + name, later_[file]).ok());
  }
  // The global step the folder resumes from, checking the weights match it.
  int64_t Resumed() {
    Trainer fresh(99);
    TrainingState state = fresh.State();
    absl::StatusOr<std::optional<TrainingProgress>> r =
        LoadTrainingCheckpoint(dir_, state, 1);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || !r->has_value()) return -1;
    EXPECT_EQ(fresh.Weights(),
              (*r)->global_step == 1 ? after_one_ : after_two_);
    return (*r)->global_step;
  }
  std::string dir_;
  std::vector<std::vector<float>> after_one_, after_two_;
  std::map<std::string, std::string> later_;
};

const std::string kNext = kPendingSuffix;

TEST_F(KilledSaveTest, DuringPhaseOneTheOldPairIsTaken) {
  Put(kTrainingStateFile, kTrainingStateFile + kNext);
  EXPECT_EQ(Resumed(), 1);
}

TEST_F(KilledSaveTest, AfterPhaseOneTheNewPairIsTaken) {
  Put(kTrainingStateFile, kTrainingStateFile + kNext);
  Put(kModelFile, kModelFile + kNext);
  EXPECT_EQ(Resumed(), 2);
}

TEST_F(KilledSaveTest, BetweenTheRenamesTheNewPairIsTaken) {
  Put(kTrainingStateFile, kTrainingStateFile);
  Put(kModelFile, kModelFile + kNext);
  EXPECT_EQ(Resumed(), 2);
}

TEST_F(KilledSaveTest, TheNextSaveCommitsAndLeavesNoPendingFile) {
  Put(kTrainingStateFile, kTrainingStateFile);
  Put(kModelFile, kModelFile + kNext);
  Trainer run(11);
  run.Steps(3);
  ASSERT_TRUE(
      SaveTrainingCheckpoint(dir_, run.State(), Progress(0, 3, 3, 1)).ok());
  EXPECT_FALSE(FileExists(dir_ + "/" + kModelFile + kNext));
  EXPECT_FALSE(FileExists(dir_ + "/" + kTrainingStateFile + kNext));
  Trainer fresh(99);
  TrainingState state = fresh.State();
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(dir_, state, 1);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->global_step, 3);
  EXPECT_EQ(fresh.Weights(), run.Weights());
}

TEST(TrainingCheckpointTest, FirstSaveKilledInPhaseOneIsNoCheckpoint) {
  const std::string dir = TestDir("first-killed");
  Trainer run(4);
  ASSERT_TRUE(SaveTrainingCheckpoint(dir, run.State(), {}).ok());
  ASSERT_TRUE(RenameDurably(dir + "/" + kTrainingStateFile,
                            dir + "/" + kTrainingStateFile + kNext)
                  .ok());
  std::remove((dir + "/" + kModelFile).c_str());
  EXPECT_FALSE(HasTrainingCheckpoint(dir));
  TrainingState state = run.State();
  absl::StatusOr<std::optional<TrainingProgress>> r =
      LoadTrainingCheckpoint(dir, state, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_value());
}

class RefusedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    Trainer saved(5);
    saved.Steps(1);
    ASSERT_TRUE(
        SaveTrainingCheckpoint(dir_, saved.State(), Progress(0, 0, 1, 2)).ok());
    target_.Steps(1);
    before_ = target_.Weights();
    momentum_before_ = *target_.sgd->momentum_buffer(0).ToVector<float>();
    gen_before_ = target_.gen.State();
  }
  // Loads into target_ and checks that nothing changed.
  std::string Refused(int64_t world_size = 2) {
    TrainingState state = target_.State();
    absl::StatusOr<std::optional<TrainingProgress>> r =
        LoadTrainingCheckpoint(dir_, state, world_size);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(target_.Weights(), before_);
    EXPECT_EQ(*target_.sgd->momentum_buffer(0).ToVector<float>(),
              momentum_before_);
    EXPECT_EQ(target_.gen.State(), gen_before_);
    return std::string(r.status().message());
  }
  std::string dir_;
  Trainer target_{6};
  std::vector<std::vector<float>> before_;
  std::vector<float> momentum_before_;
  std::string gen_before_;
};

TEST_F(RefusedTest, TornPair) {
  Trainer later(5);
  later.Steps(2);
  ASSERT_TRUE(SaveSafetensors(dir_ + "/" + kModelFile, later.model->StateDict(),
                              {{"tandem.global_step", "2"}})
                  .ok());
  EXPECT_THAT(Refused(), HasSubstr("is torn"));
}

TEST_F(RefusedTest, TrainingStateWithoutItsModel) {
  std::remove((dir_ + "/" + kModelFile).c_str());
  EXPECT_TRUE(HasTrainingCheckpoint(dir_));
  const std::string message = Refused();
  EXPECT_THAT(message, HasSubstr("is torn: there is a " +
                                 std::string(kTrainingStateFile) + " but no " +
                                 kModelFile));
  EXPECT_THAT(message, HasSubstr(dir_ + "/" + kTrainingStateFile + ": step 1"));
}

TEST_F(RefusedTest, ModelWithoutItsTrainingState) {
  std::remove((dir_ + "/" + kTrainingStateFile).c_str());
  EXPECT_THAT(Refused(),
              HasSubstr("is torn: there is a " + std::string(kModelFile) +
                        " but no " + kTrainingStateFile));
}

// A model saved by another run at the same step and world size: every
// field but the pair's id agrees, and it is refused.
TEST_F(RefusedTest, ModelOfAnotherRunAtTheSameStep) {
  const std::string other = dir_ + "-other";
  Trainer run(77);
  run.Steps(1);
  ASSERT_TRUE(
      SaveTrainingCheckpoint(other, run.State(), Progress(0, 0, 1, 2)).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/" + kModelFile,
                                  *ReadFile(other + "/" + kModelFile))
                  .ok());
  const std::string message = Refused();
  EXPECT_THAT(message, HasSubstr("is torn: mixed"));
  EXPECT_THAT(message, HasSubstr(dir_ + "/" + kModelFile + ": step 1"));
  EXPECT_THAT(message, HasSubstr(dir_ + "/" + kTrainingStateFile + ": step 1"));
}

// The model's weights edited in place (its id left as saved).
TEST_F(RefusedTest, ModelEditedAfterTheSave) {
  const std::string path = dir_ + "/" + kModelFile;
  absl::StatusOr<SafetensorsContent> model = LoadSafetensors(path);
  ASSERT_TRUE(model.ok());
  model->tensors[1].tensor =
      *Tensor::Full(model->tensors[1].tensor.shape(), 0.5);
  ASSERT_TRUE(SaveSafetensors(path, model->tensors, model->metadata).ok());
  EXPECT_THAT(Refused(), HasSubstr("is torn: mixed"));
}

TEST_F(RefusedTest, OtherWorldSize) {
  EXPECT_THAT(Refused(3), HasSubstr("--world_size=2"));
}

TEST_F(RefusedTest, ModelThatDoesNotFit) {
  Trainer wide(5, /*out=*/4);
  ASSERT_TRUE(
      SaveTrainingCheckpoint(dir_, wide.State(), Progress(0, 0, 1, 2)).ok());
  EXPECT_THAT(Refused(), HasSubstr("\"0.weight\""));
}

TEST_F(RefusedTest, TruncatedTrainingState) {
  const std::string path = dir_ + "/" + kTrainingStateFile;
  std::string bytes = *ReadFile(path);
  ASSERT_TRUE(
      WriteFileAtomically(path, bytes.substr(0, bytes.size() - 3)).ok());
  EXPECT_THAT(Refused(), HasSubstr(path));
}

}  // namespace
}  // namespace tandem::train::checkpoint
