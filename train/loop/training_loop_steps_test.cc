// TrainingLoop's per-step options on simulated ranks (training_loop_test
// covers the rest):
//   - grad_accum: the loop trains the weights of a hand-written loop that
//     runs each batch's micro-batches (loss / grad_accum, NoSync for all but
//     the last) bit for bit, under DDP and FSDP, and its StepView::loss is
//     the micro-batches' mean; a batch it does not divide, and grad_accum
//     0, are InvalidArgument;
//   - begin_step runs before every step with its global step;
//   - position_by_global_step: a run stopped at max_steps inside an epoch
//     resumes there when given more steps (the checkpoint names the next
//     epoch) and ends with the uninterrupted run's weights bit for bit;
//     checkpoint_extra rides in the checkpoint; max_steps 0 is refused;
//   - lr_at sets each step's learning rate before it;
//   - reseed_each_step: a stream per rank and step, the same after a resume;
//   - model_description rides in every checkpoint and a checkpoint of
//     another model is refused, naming both;
//   - step_report adjusts what the monitor writes;
//   - mean_loss_over_ranks: each step's loss averaged over the ranks, the
//     monitor's loss; a run positioned by its global step is one epoch of
//     max_steps steps to the monitor; StepView::seconds is measured.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/loop/run_monitor.h"
#include "train/loop/training_loop.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSamples = 16;  // 8 per rank at 2 ranks
constexpr int64_t kBatch = 4;     // 2 steps per epoch (drop_last)

absl::StatusOr<TensorDataset> Data() {
  Generator gen(5);
  std::vector<float> x(kSamples * 3);
  gen.Uniform(x.data(), static_cast<int64_t>(x.size()), -1.f, 1.f);
  std::vector<int64_t> y(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) y[i] = (i * 5) % 2;
  TANDEM_ASSIGN_OR_RETURN(Tensor features,
                          Tensor::FromVector(x, {kSamples, 3}));
  TANDEM_ASSIGN_OR_RETURN(Tensor labels, Tensor::FromVector(y));
  return TensorDataset::Create(features, labels);
}

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(9);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(3, 6, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(6, 2, gen)));
  return model;
}

struct Outcome {
  absl::Status status;
  std::vector<std::vector<float>> weights;  // rank 0's full state
  std::vector<double> losses;               // rank 0's StepView::loss
  std::vector<std::string> steps;           // "global@epoch:step"
  std::string resumed_model;                // resumed_extra()["test.model"]
  std::vector<double> lrs;                  // rank 0's optimizer lr per step
  std::vector<std::vector<float>> draws;    // per rank, see Train
};

// The loop (or, with `by_hand`, a hand-written loop of micro-batches) on 2
// ranks in `mode`. A non-null options.reseed_each_step asks for a generator
// of each rank's own in its place, drawn from once after every step
// (Outcome::draws).
Outcome Train(ShardMode mode, const LoopOptions& options,
              bool by_hand = false) {
  Outcome out;
  std::vector<std::vector<float>> draws_by_rank(2);  // one writer each
  sim::RunResult r =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Data());
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<Strategy> strategy,
            Strategy::Create(mode, *model, comm,
                             SgdFactory(0.2, {.momentum = 0.9})));
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches batches,
            SampledBatches::Create(data, comm, kBatch, /*drop_last=*/true));
        Outcome seen;
        if (by_hand) {
          const int64_t parts = options.grad_accum;
          for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
            TANDEM_ASSIGN_OR_RETURN(int64_t steps, batches.BeginEpoch(epoch));
            for (int64_t b = 0; b < steps; ++b) {
              TANDEM_ASSIGN_OR_RETURN(Batch batch, batches.GetBatch(b));
              strategy->ZeroGrad();
              double sum = 0;
              const int64_t rows = kBatch / parts;
              for (int64_t m = 0; m < parts; ++m) {
                TANDEM_ASSIGN_OR_RETURN(
                    Tensor x, batch.features.View(m * rows * 3, {rows, 3}));
                TANDEM_ASSIGN_OR_RETURN(Tensor y,
                                        batch.labels.View(m * rows, {rows}));
                auto no_sync =
                    m + 1 < parts ? strategy->NoSync() : std::nullopt;
                TANDEM_ASSIGN_OR_RETURN(Tensor out, strategy->Forward(x));
                TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(out, y));
                TANDEM_ASSIGN_OR_RETURN(double v, loss.Item());
                sum += v;
                TANDEM_ASSIGN_OR_RETURN(loss,
                                        Div(loss, static_cast<double>(parts)));
                TANDEM_RETURN_IF_ERROR(strategy->Backward(loss));
              }
              TANDEM_RETURN_IF_ERROR(strategy->Step());
              seen.losses.push_back(sum / static_cast<double>(parts));
            }
          }
        } else {
          Generator step_gen(0);
          LoopOptions mine = options;
          if (options.reseed_each_step != nullptr) {
            mine.reseed_each_step = &step_gen;
          }
          std::vector<float> draws;
          TrainingLoop loop(comm, *model, *strategy, mine);
          LoopHooks hooks;
          int64_t begun = -1;
          hooks.begin_step = [&](const StepView& s) -> absl::Status {
            begun = s.global_step;
            return absl::OkStatus();
          };
          hooks.after_step = [&](const StepView& s) -> absl::Status {
            EXPECT_EQ(begun, s.global_step);  // begin_step ran for this step
            seen.losses.push_back(s.loss);
            seen.lrs.push_back(strategy->local_optimizer()->lr(0));
            if (mine.reseed_each_step != nullptr) {
              float u = 0;
              step_gen.Uniform(&u, 1, 0.f, 1.f);
              draws.push_back(u);
            }
            seen.steps.push_back(
                absl::StrCat(s.global_step, "@", s.epoch, ":", s.step));
            return absl::OkStatus();
          };
          TANDEM_ASSIGN_OR_RETURN(checkpoint::TrainingProgress start,
                                  loop.Resume());
          if (start.global_step > 0) {
            auto it = loop.resumed_extra().find("test.model");
            if (it != loop.resumed_extra().end()) {
              seen.resumed_model = it->second;
            }
          }
          TANDEM_RETURN_IF_ERROR(loop.Run(batches, CrossEntropyLoss(), hooks));
          draws_by_rank[rank] = draws;
        }
        TANDEM_ASSIGN_OR_RETURN(nn::StateDict state,
                                strategy->FullModelState());
        for (const nn::NamedTensor& e : state) {
          TANDEM_ASSIGN_OR_RETURN(std::vector<float> v,
                                  e.tensor.ToVector<float>());
          seen.weights.push_back(std::move(v));
        }
        if (rank == 0) out = std::move(seen);
        return absl::OkStatus();
      });
  out.status = r.status();
  if (options.reseed_each_step != nullptr) out.draws = draws_by_rank;
  return out;
}

TEST(TrainingLoopStepsTest, GradAccumIsMicroBatchesUnderNoSync) {
  for (ShardMode mode : {ShardMode::kNone, ShardMode::kFsdp}) {
    SCOPED_TRACE(ShardModeName(mode));
    LoopOptions options;
    options.who = "test";
    options.epochs = 2;
    options.grad_accum = 2;
    Outcome hand = Train(mode, options, /*by_hand=*/true);
    ASSERT_TRUE(hand.status.ok()) << hand.status;
    Outcome loop = Train(mode, options);
    ASSERT_TRUE(loop.status.ok()) << loop.status;
    ASSERT_FALSE(loop.weights.empty());
    EXPECT_EQ(loop.weights, hand.weights);
    EXPECT_EQ(loop.losses, hand.losses);
    // Accumulation changes the step (so the equality above covers it).
    options.grad_accum = 1;
    Outcome whole = Train(mode, options);
    ASSERT_TRUE(whole.status.ok()) << whole.status;
    EXPECT_NE(whole.losses, loop.losses);
  }
}

TEST(TrainingLoopStepsTest, RefusesMicroBatchesThatDoNotDivideTheBatch) {
  LoopOptions options;
  options.who = "test";
  options.epochs = 1;
  options.grad_accum = 3;
  Outcome three = Train(ShardMode::kNone, options);
  EXPECT_EQ(three.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(three.status.message(),
              HasSubstr("test: gradient accumulation cuts each batch into 3 "
                        "equal micro-batches along its first dimension; this "
                        "batch has 4 rows"));
  options.grad_accum = 0;
  Outcome zero = Train(ShardMode::kNone, options);
  EXPECT_EQ(zero.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status.message(), HasSubstr("grad_accum must be >= 1"));
}

TEST(TrainingLoopStepsTest, PositionByGlobalStepResumesInsideTheEpoch) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/by_global");
  std::filesystem::remove_all(dir);
  LoopOptions options;
  options.who = "test";
  options.epochs = 4;  // 8 steps
  options.max_steps = 8;
  options.position_by_global_step = true;
  Outcome straight = Train(ShardMode::kNone, options);
  ASSERT_TRUE(straight.status.ok()) << straight.status;
  ASSERT_EQ(straight.steps.size(), 8u);

  options.checkpoint.dir = dir;
  options.checkpoint_extra = {{"test.model", "m1"}};
  options.max_steps = 5;  // stops after epoch 2's first step, saved there
  Outcome first = Train(ShardMode::kNone, options);
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.steps.back(), "4@2:0");
  options.max_steps = 8;
  Outcome rest = Train(ShardMode::kNone, options);
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  EXPECT_EQ(rest.resumed_model, "m1");
  EXPECT_EQ(rest.steps, (std::vector<std::string>{"5@2:1", "6@3:0", "7@3:1"}));
  EXPECT_EQ(rest.weights, straight.weights);

  options.max_steps = 0;
  Outcome unbounded = Train(ShardMode::kNone, options);
  EXPECT_EQ(unbounded.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unbounded.status.message(),
              HasSubstr("one schedule of max_steps steps"));
}

TEST(TrainingLoopStepsTest, LrAtSetsEachStepsRateBeforeTheStep) {
  LoopOptions options;
  options.who = "test";
  options.epochs = 2;  // 4 steps
  options.lr_at = [](int64_t step) { return 0.1 + 0.01 * step; };
  for (ShardMode mode : {ShardMode::kNone, ShardMode::kZero1}) {
    Outcome out = Train(mode, options);
    ASSERT_TRUE(out.status.ok()) << out.status;
    EXPECT_EQ(out.lrs,
              (std::vector<double>{options.lr_at(0), options.lr_at(1),
                                   options.lr_at(2), options.lr_at(3)}))
        << ShardModeName(mode);
  }
  // Without it the optimizer keeps its own rate.
  options.lr_at = nullptr;
  Outcome plain = Train(ShardMode::kNone, options);
  EXPECT_EQ(plain.lrs, (std::vector<double>{0.2, 0.2, 0.2, 0.2}));
}

TEST(TrainingLoopStepsTest, ReseedEachStepDrawsByRankAndStepAcrossAResume) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/reseed");
  std::filesystem::remove_all(dir);
  Generator placeholder(0);  // Train gives each rank a generator of its own
  LoopOptions options;
  options.who = "test";
  options.epochs = 2;  // 4 steps
  options.reseed_each_step = &placeholder;
  options.step_seed = 7;
  Outcome straight = Train(ShardMode::kNone, options);
  ASSERT_TRUE(straight.status.ok()) << straight.status;
  ASSERT_EQ(straight.draws.size(), 2u);
  ASSERT_EQ(straight.draws[0].size(), 4u);
  EXPECT_NE(straight.draws[0], straight.draws[1]);        // a stream per rank
  EXPECT_NE(straight.draws[0][0], straight.draws[0][1]);  // and per step
  EXPECT_EQ(Train(ShardMode::kNone, options).draws, straight.draws);
  options.step_seed = 8;
  EXPECT_NE(Train(ShardMode::kNone, options).draws, straight.draws);
  // Stopped after epoch 0 and resumed: steps 2 and 3 draw as before.
  options.step_seed = 7;
  options.checkpoint.dir = dir;
  options.epochs = 1;
  ASSERT_TRUE(Train(ShardMode::kNone, options).status.ok());
  options.epochs = 2;
  Outcome resumed = Train(ShardMode::kNone, options);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  for (int rank : {0, 1}) {
    EXPECT_EQ(resumed.draws[rank],
              std::vector<float>(straight.draws[rank].begin() + 2,
                                 straight.draws[rank].end()));
  }
}

TEST(TrainingLoopStepsTest, ModelDescriptionRefusesAnotherModelsCheckpoint) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/model_desc");
  std::filesystem::remove_all(dir);
  LoopOptions options;
  options.who = "test";
  options.epochs = 1;
  options.checkpoint.dir = dir;
  options.model_description = "width=6";
  options.must_match = {{"--lr", "0.2"}};
  ASSERT_TRUE(Train(ShardMode::kNone, options).status.ok());
  options.epochs = 2;
  Outcome same = Train(ShardMode::kNone, options);  // "<who>.model" is saved
  ASSERT_TRUE(same.status.ok()) << same.status;
  EXPECT_EQ(same.resumed_model, "width=6");
  options.model_description = "width=8";
  Outcome other = Train(ShardMode::kNone, options);
  EXPECT_EQ(other.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status.message(),
              HasSubstr(absl::StrCat("test: the checkpoint in ", dir,
                                     " was written by the model width=6; "
                                     "this run's model is width=8; resume "
                                     "with that configuration or use a fresh "
                                     "--checkpoint_dir")));
  // A checkpoint the run cannot resume names this run's model too.
  options.model_description = "width=6";
  options.must_match = {{"--lr", "0.3"}};
  Outcome refused = Train(ShardMode::kNone, options);
  EXPECT_THAT(refused.status.message(),
              HasSubstr("(test: this run's model is width=6; a checkpoint "
                        "folder holds one configuration's run: use a fresh "
                        "--checkpoint_dir)"));
}

// The loop over Data() and Mlp() on 2 simulated ranks with `options` (SGD
// at 0.1, batches of kBatch, drop_last), each rank's hooks from
// hooks_for(rank); the run's status.
absl::Status RunTwoRanks(const LoopOptions& options,
                         const std::function<LoopHooks(int rank)>& hooks_for) {
  sim::RunResult r =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Data());
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            auto loop, TrainingLoop::Create(comm, *model, ShardMode::kNone,
                                            SgdFactory(0.1), options));
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches batches,
            SampledBatches::Create(data, comm, kBatch, /*drop_last=*/true));
        return loop->Run(batches, CrossEntropyLoss(), hooks_for(rank));
      });
  return r.status();
}

TEST(TrainingLoopStepsTest, StepReportAdjustsTheMonitorsRecord) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/steps.jsonl");
  std::filesystem::remove(path);
  RunMonitor monitor(
      {.name = "test", .progress = ProgressMode::kOff, .metrics_path = path});
  {
    ScopedActiveRunMonitor active(&monitor);
    LoopOptions options;
    options.who = "test";
    options.epochs = 1;
    const absl::Status r = RunTwoRanks(options, [](int) {
      LoopHooks hooks;
      hooks.step_report = [](const StepView& s, StepReport& report) {
        report.samples = 1000 + s.global_step;
        report.loss = 0.5;
      };
      return hooks;
    });
    ASSERT_TRUE(r.ok()) << r;
  }
  ASSERT_TRUE(monitor.Finish().ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("\"samples\":1000,\"loss\":0.5"));
  EXPECT_THAT(text.str(), HasSubstr("\"samples\":1001,\"loss\":0.5"));
}

TEST(TrainingLoopStepsTest, MeanLossOverRanksAndTheOneScheduleReport) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/mean.jsonl");
  std::filesystem::remove(path);
  RunMonitor monitor(
      {.name = "test", .progress = ProgressMode::kOff, .metrics_path = path});
  // Per global step: each rank's loss, and each rank's mean_loss.
  std::map<int64_t, std::vector<double>> losses, means;
  std::mutex mu;
  bool timed = true;
  {
    ScopedActiveRunMonitor active(&monitor);
    LoopOptions options;
    options.who = "test";
    options.epochs = 2;  // 2 steps each
    options.max_steps = 3;
    options.position_by_global_step = true;
    options.mean_loss_over_ranks = true;
    const absl::Status r = RunTwoRanks(options, [&](int rank) {
      LoopHooks hooks;
      hooks.after_step = [&, rank](const StepView& s) -> absl::Status {
        std::lock_guard<std::mutex> lock(mu);
        losses[s.global_step].resize(2);
        means[s.global_step].resize(2);
        losses[s.global_step][rank] = s.loss;
        means[s.global_step][rank] = s.mean_loss;
        if (!(s.seconds > 0)) timed = false;
        return absl::OkStatus();
      };
      return hooks;
    });
    ASSERT_TRUE(r.ok()) << r;
  }
  ASSERT_TRUE(monitor.Finish().ok());
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_TRUE(timed);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  for (const auto& [step, pair] : losses) {
    EXPECT_NE(pair[0], pair[1]);  // the ranks' batches differ
    const double mean = (pair[0] + pair[1]) / 2;
    EXPECT_EQ(means[step][0], mean);
    EXPECT_EQ(means[step][1], mean);
    // One epoch of max_steps steps, the mean as the monitor's loss.
    EXPECT_THAT(text.str(),
                HasSubstr(absl::StrCat("{\"kind\":\"step\",\"epoch\":1,"
                                       "\"step\":",
                                       step + 1, ",\"global_step\":", step + 1,
                                       ",\"samples\":8,\"loss\":",
                                       absl::StrFormat("%.9g", mean))));
  }
  // Off: mean_loss stays unknown.
  LoopOptions plain;
  plain.who = "test";
  plain.epochs = 1;
  const absl::Status off = RunTwoRanks(plain, [](int) {
    LoopHooks hooks;
    hooks.after_step = [](const StepView& s) -> absl::Status {
      EXPECT_TRUE(std::isnan(s.mean_loss));
      return absl::OkStatus();
    };
    return hooks;
  });
  ASSERT_TRUE(off.ok()) << off;
}

}  // namespace
}  // namespace tandem::train
