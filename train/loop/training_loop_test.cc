// TrainingLoop on simulated ranks:
//   - it trains the weights a hand-written loop over the same Strategy,
//     sampler and batches trains, bit for bit, calling the hooks once per
//     step and epoch with the step's numbers;
//   - a run stopped mid-epoch resumes from its last checkpoint (under DDP
//     and under FSDP, whose full state is gathered for the save) and ends
//     with the uninterrupted run's weights bit for bit; the resumed epoch
//     starts at the saved step and gets back what mid_epoch_extra saved,
//     and the epoch sums (LoopOptions::epoch_sums) end each epoch with
//     every rank's total, a resumed epoch's included;
//   - a GradScaler skips a step on every rank when one rank's gradient
//     holds an inf, grows and halves its scale as PyTorch's, and a resumed
//     run continues its scale and a StepLR's rate from the checkpoint;
//   - max_steps ends the run inside an epoch (which still ends).
//   - a learning rate that blows the weights up stops every rank with the
//     finite check's error;
//   - under LoopOptions::autocast the forward runs in that dtype;
//   - LoopOptions::max_grad_norm clips like optim::ClipGradNorm after a
//     hand-written loop's Backward (none: bit for bit; zero2 and fsdp,
//     whose norm is summed from shards: within 1e-6), and a bad norm is
//     refused before any step.
#include "train/loop/training_loop.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
#include "tensor/optim/clip_grad.h"
#include "tensor/optim/lr_scheduler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSamples = 22;  // 11 per rank at 2 ranks
constexpr int64_t kBatch = 3;     // 4 steps per epoch, the last one short
constexpr int64_t kEpochs = 3;

absl::StatusOr<TensorDataset> Data() {
  Generator gen(11);
  std::vector<float> x(kSamples * 4);
  gen.Uniform(x.data(), static_cast<int64_t>(x.size()), -1.f, 1.f);
  std::vector<int64_t> y(kSamples);
  for (int64_t i = 0; i < kSamples; ++i) y[i] = (i * 7) % 3;
  TANDEM_ASSIGN_OR_RETURN(Tensor features,
                          Tensor::FromVector(x, {kSamples, 4}));
  TANDEM_ASSIGN_OR_RETURN(Tensor labels, Tensor::FromVector(y));
  return TensorDataset::Create(features, labels);
}

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(3);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(4, 8, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(8, 3, gen)));
  return model;
}

using Weights = std::vector<std::pair<std::string, std::vector<float>>>;

absl::StatusOr<Weights> WeightsOf(Strategy& strategy) {
  TANDEM_ASSIGN_OR_RETURN(nn::StateDict state, strategy.FullModelState());
  Weights out;
  for (const nn::NamedTensor& e : state) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, e.tensor.ToVector<float>());
    out.push_back({e.name, std::move(v)});
  }
  return out;
}

absl::StatusOr<Tensor> Loss(const Tensor& output, const Tensor& labels) {
  return CrossEntropy(output, labels);
}

// What the hooks saw on one rank.
struct Seen {
  std::vector<std::string> steps;   // "epoch:step/steps"
  std::vector<std::string> epochs;  // "epoch"
  std::vector<std::string> begins;  // "epoch@first_step"
  std::string resumed_count;        // resumed_extra()'s "count", if any
  std::vector<std::string> scales;  // "scale:skipped" per step (a scaler)
  std::vector<double> lrs;          // the optimizer's lr after each step
  std::vector<double> epoch_rows;   // epoch_sums()[0] in end_epoch
};

// What Train adds to the loop beyond `options`.
struct Extras {
  // A StepLR (step 1, gamma 0.5) stepped every epoch.
  bool step_lr = false;
  // Rank 1 puts an inf into its first gradient before the optimizer step of
  // this global step (-1: never).
  int64_t inject_inf_at = -1;
};

// On `world` ranks in `mode`: the loop (or, with `by_hand`, a hand-written
// loop) for kEpochs epochs; returns rank 0's weights and hooks. With
// `stop_after` >= 0 the after_step hook fails at that global step.
struct Outcome {
  absl::Status status;
  Weights weights;
  Seen seen;
};

Outcome Train(int world, ShardMode mode, LoopOptions options,
              bool by_hand = false, int64_t stop_after = -1, double lr = 0.1,
              Extras extras = {}) {
  Outcome out;
  sim::RunResult r =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Data());
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<Strategy> strategy,
            Strategy::Create(mode, *model, comm,
                             SgdFactory(lr, {.momentum = 0.9})));
        TANDEM_ASSIGN_OR_RETURN(
            SampledBatches batches,
            SampledBatches::Create(data, comm, kBatch, /*drop_last=*/false));
        Seen seen;
        if (by_hand) {
          if (options.max_grad_norm > 0) {
            // The hand loop clips DDP's all-reduced gradients itself.
            EXPECT_EQ(mode, ShardMode::kNone);
          }
          for (int64_t epoch = 0; epoch < kEpochs; ++epoch) {
            TANDEM_ASSIGN_OR_RETURN(int64_t steps, batches.BeginEpoch(epoch));
            for (int64_t b = 0; b < steps; ++b) {
              TANDEM_ASSIGN_OR_RETURN(Batch batch, batches.GetBatch(b));
              TANDEM_ASSIGN_OR_RETURN(Tensor y,
                                      strategy->Forward(batch.features));
              TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                                      CrossEntropy(y, batch.labels));
              strategy->ZeroGrad();
              TANDEM_RETURN_IF_ERROR(strategy->Backward(loss));
              if (options.max_grad_norm > 0) {
                TANDEM_RETURN_IF_ERROR(
                    optim::ClipGradNorm(model->Parameters(),
                                        options.max_grad_norm)
                        .status());
              }
              TANDEM_RETURN_IF_ERROR(strategy->Step());
            }
          }
        } else {
          TrainingLoop loop(comm, *model, *strategy, options);
          if (extras.step_lr) {
            TANDEM_ASSIGN_OR_RETURN(
                auto step_lr,
                optim::StepLR::Create(strategy->full_optimizer(), 1, 0.5));
            loop.SetLrScheduler(std::move(step_lr), ScheduleEvery::kEpoch);
          }
          int64_t global = 0;
          LoopHooks hooks;
          hooks.before_optimizer_step = [&](const StepView& s) -> absl::Status {
            if (rank != 1 || s.global_step != extras.inject_inf_at) {
              return absl::OkStatus();
            }
            Tensor grad = model->Parameters()[0].grad();
            grad.data<float>()[0] = std::numeric_limits<float>::infinity();
            return absl::OkStatus();
          };
          hooks.begin_epoch = [&](int64_t epoch, int64_t first) {
            seen.begins.push_back(absl::StrCat(epoch, "@", first));
            if (first > 0) {
              auto it = loop.resumed_extra().find("test.count");
              if (it != loop.resumed_extra().end()) {
                seen.resumed_count = it->second;
              }
            }
            return absl::OkStatus();
          };
          hooks.after_step = [&](const StepView& s) -> absl::Status {
            if (global++ == stop_after) {
              return absl::AbortedError("stopped by the test");
            }
            seen.steps.push_back(
                absl::StrCat(s.epoch, ":", s.step, "/", s.steps_in_epoch));
            if (options.grad_scaler.has_value()) {
              seen.scales.push_back(
                  absl::StrCat(s.loss_scale, ":", s.skipped ? 1 : 0));
            }
            seen.lrs.push_back(strategy->lr());
            if (s.sums != nullptr && !s.sums->empty()) {
              (*s.sums)[0] += static_cast<double>(s.batch->labels.dim(0));
            }
            EXPECT_EQ(s.output.dim(0), s.batch->labels.dim(0));
            EXPECT_EQ(s.output.dtype(), options.autocast.value_or(DType::kF32));
            return absl::OkStatus();
          };
          hooks.mid_epoch_extra =
              [&]() -> absl::StatusOr<checkpoint::Metadata> {
            return checkpoint::Metadata{{"test.count", absl::StrCat(global)}};
          };
          hooks.end_epoch = [&](int64_t epoch,
                                int64_t) -> absl::StatusOr<EpochEnd> {
            seen.epochs.push_back(absl::StrCat(epoch));
            if (!loop.epoch_sums().empty()) {
              seen.epoch_rows.push_back(loop.epoch_sums()[0]);
            }
            return EpochEnd{};
          };
          TANDEM_RETURN_IF_ERROR(loop.Run(batches, Loss, hooks));
        }
        TANDEM_ASSIGN_OR_RETURN(Weights w, WeightsOf(*strategy));
        if (rank == 0) {
          out.weights = std::move(w);
          out.seen = std::move(seen);
        }
        return absl::OkStatus();
      });
  out.status = r.status();
  return out;
}

TEST(TrainingLoopTest, TrainsAHandWrittenLoopsWeightsBitForBit) {
  for (ShardMode mode :
       {ShardMode::kNone, ShardMode::kZero2, ShardMode::kFsdp}) {
    Outcome hand = Train(2, mode, {.epochs = kEpochs}, /*by_hand=*/true);
    ASSERT_TRUE(hand.status.ok()) << hand.status;
    Outcome loop = Train(2, mode, {.who = "test", .epochs = kEpochs});
    ASSERT_TRUE(loop.status.ok()) << loop.status;
    ASSERT_FALSE(loop.weights.empty());
    EXPECT_EQ(loop.weights, hand.weights) << ShardModeName(mode);
    std::vector<std::string> steps;
    for (int e = 0; e < kEpochs; ++e) {
      for (int b = 0; b < 4; ++b)
        steps.push_back(absl::StrCat(e, ":", b, "/4"));
    }
    EXPECT_EQ(loop.seen.steps, steps);
    EXPECT_EQ(loop.seen.epochs, (std::vector<std::string>{"0", "1", "2"}));
    EXPECT_EQ(loop.seen.begins,
              (std::vector<std::string>{"0@0", "1@0", "2@0"}));
  }
}

TEST(TrainingLoopTest, ResumesMidEpochToTheUninterruptedWeights) {
  for (ShardMode mode : {ShardMode::kNone, ShardMode::kFsdp}) {
    const std::string dir =
        absl::StrCat(::testing::TempDir(), "/resume_", ShardModeName(mode));
    std::filesystem::remove_all(dir);
    // The epoch sums count the rows trained on, over both ranks: every
    // epoch's 22, a resumed one's included (restored from the checkpoint
    // beside mid_epoch_extra's entry).
    // Set field by field: GCC 12 at -O2 (--config=opt) reports a false
    // maybe-uninitialized on the nested designated initialisers' strings.
    LoopOptions plain;
    plain.who = "test";
    plain.epochs = kEpochs;
    plain.epoch_sums = {"rows"};
    LoopOptions options = plain;
    options.checkpoint.dir = dir;
    options.checkpoint.every_steps = 1;
    Outcome straight = Train(2, mode, plain);
    EXPECT_EQ(straight.seen.epoch_rows, (std::vector<double>{22, 22, 22}));
    ASSERT_TRUE(straight.status.ok()) << straight.status;
    // Stopped in the after_step of global step 6 (epoch 1, step 2): the
    // last save followed global step 5.
    Outcome stopped = Train(2, mode, options, false, /*stop_after=*/6);
    EXPECT_THAT(stopped.status.message(), HasSubstr("stopped by the test"));
    Outcome resumed = Train(2, mode, options);
    ASSERT_TRUE(resumed.status.ok()) << resumed.status;
    EXPECT_EQ(resumed.weights, straight.weights) << ShardModeName(mode);
    EXPECT_EQ(resumed.seen.begins, (std::vector<std::string>{"1@2", "2@0"}));
    ASSERT_FALSE(resumed.seen.steps.empty());
    EXPECT_EQ(resumed.seen.steps.front(), "1:2/4");
    // mid_epoch_extra ran after the after_step of global step 5, which had
    // counted 6 steps.
    EXPECT_EQ(resumed.seen.resumed_count, "6");
    EXPECT_EQ(resumed.seen.epoch_rows, (std::vector<double>{22, 22}));
  }
}

TEST(TrainingLoopTest, NonFiniteWeightsStopEveryRank) {
  Outcome out = Train(2, ShardMode::kNone, {.who = "test", .epochs = kEpochs},
                      false, -1, /*lr=*/1e30);
  EXPECT_EQ(out.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status.message(), HasSubstr("non-finite values at epoch "));
}

TEST(TrainingLoopTest, AutocastRunsTheForwardInItsDtype) {
  // after_step checks the output's dtype against options.autocast.
  Outcome out = Train(2, ShardMode::kNone,
                      {.who = "test", .epochs = 1, .autocast = DType::kBF16});
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.seen.steps.size(), 4u);
}

TEST(TrainingLoopTest, ClipsLikeClipGradNormInEveryStrategy) {
  const LoopOptions clip{
      .who = "test", .epochs = kEpochs, .max_grad_norm = 0.05};
  Outcome hand = Train(2, ShardMode::kNone, clip, /*by_hand=*/true);
  ASSERT_TRUE(hand.status.ok()) << hand.status;
  Outcome unclipped = Train(2, ShardMode::kNone, {.epochs = kEpochs}, true);
  ASSERT_TRUE(unclipped.status.ok()) << unclipped.status;
  // The norm is small enough to bite.
  EXPECT_NE(hand.weights, unclipped.weights);
  Outcome none = Train(2, ShardMode::kNone, clip);
  ASSERT_TRUE(none.status.ok()) << none.status;
  EXPECT_EQ(none.weights, hand.weights);
  for (ShardMode mode : {ShardMode::kZero2, ShardMode::kFsdp}) {
    Outcome sharded = Train(2, mode, clip);
    ASSERT_TRUE(sharded.status.ok()) << sharded.status;
    ASSERT_EQ(sharded.weights.size(), hand.weights.size());
    for (size_t i = 0; i < hand.weights.size(); ++i) {
      const std::vector<float>& a = sharded.weights[i].second;
      const std::vector<float>& b = hand.weights[i].second;
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        EXPECT_NEAR(a[k], b[k], 1e-6 * std::max(1.0f, std::abs(b[k])))
            << ShardModeName(mode) << " " << hand.weights[i].first << "[" << k
            << "]";
      }
    }
  }
}

TEST(TrainingLoopTest, RefusesABadClippingNorm) {
  for (double bad :
       {-1.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    Outcome out = Train(1, ShardMode::kLocal,
                        {.who = "test", .epochs = 1, .max_grad_norm = bad});
    EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(out.status.message(),
                HasSubstr("test: the gradient clipping norm must be finite"));
    EXPECT_TRUE(out.seen.steps.empty());
  }
}

TEST(TrainingLoopTest, GradScalerSkipsOnEveryRankAndResumesItsState) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/scaler");
  std::filesystem::remove_all(dir);
  // growth_interval 3: the scale grows within the run, so a resume that
  // lost the tracker would differ.
  const optim::GradScalerOptions scaler{.init_scale = 1024,
                                        .growth_interval = 3};
  const Extras extras{.step_lr = true, .inject_inf_at = 2};
  Outcome straight =
      Train(2, ShardMode::kNone,
            {.who = "test", .epochs = kEpochs, .grad_scaler = scaler}, false,
            -1, 0.1, extras);
  ASSERT_TRUE(straight.status.ok()) << straight.status;
  // Rank 1's inf skips global step 2 on every rank and halves the scale;
  // three clean steps then double it.
  ASSERT_EQ(straight.seen.scales.size(), 12u);
  EXPECT_EQ(std::vector<std::string>(straight.seen.scales.begin(),
                                     straight.seen.scales.begin() + 7),
            (std::vector<std::string>{"1024:0", "1024:0", "1024:1", "512:0",
                                      "512:0", "512:0", "1024:0"}));
  // StepLR halves the rate after each epoch's last step (after_step sees
  // the rate the step used).
  EXPECT_EQ(straight.seen.lrs[3], 0.1);
  EXPECT_EQ(straight.seen.lrs[4], 0.05);
  EXPECT_EQ(straight.seen.lrs[8], 0.025);

  const LoopOptions options{.who = "test",
                            .epochs = kEpochs,
                            .checkpoint = {.dir = dir, .every_steps = 1},
                            .grad_scaler = scaler};
  Outcome stopped = Train(2, ShardMode::kNone, options, false,
                          /*stop_after=*/5, 0.1, extras);
  EXPECT_THAT(stopped.status.message(), HasSubstr("stopped by the test"));
  Outcome resumed = Train(2, ShardMode::kNone, options, false, -1, 0.1, extras);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status;
  EXPECT_EQ(resumed.weights, straight.weights);
  EXPECT_EQ(resumed.seen.scales,
            std::vector<std::string>(straight.seen.scales.begin() + 5,
                                     straight.seen.scales.end()));
  EXPECT_EQ(resumed.seen.lrs, std::vector<double>(straight.seen.lrs.begin() + 5,
                                                  straight.seen.lrs.end()));
}

TEST(TrainingLoopTest, GradScalerNeedsTheWholeOptimizer) {
  Outcome out = Train(
      2, ShardMode::kZero2,
      {.who = "test", .epochs = 1, .grad_scaler = optim::GradScalerOptions{}});
  EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status.message(), HasSubstr("test: a GradScaler steps"));
}

TEST(TrainingLoopTest, MaxStepsEndsTheRunInsideAnEpoch) {
  Outcome out = Train(2, ShardMode::kNone,
                      {.who = "test", .epochs = kEpochs, .max_steps = 6}, false,
                      -1, 0.1, {.step_lr = true});
  ASSERT_TRUE(out.status.ok()) << out.status;
  EXPECT_EQ(out.seen.steps,
            (std::vector<std::string>{"0:0/4", "0:1/4", "0:2/4", "0:3/4",
                                      "1:0/4", "1:1/4"}));
  // The cut epoch still ends (its hook runs); its schedule does not step.
  EXPECT_EQ(out.seen.epochs, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(out.seen.lrs.back(), 0.05);
  Outcome bad = Train(1, ShardMode::kLocal,
                      {.who = "test", .epochs = 1, .max_steps = -1});
  EXPECT_EQ(bad.status.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
