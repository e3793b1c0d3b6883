// Strategy's pipeline mode on the simulated cluster: PipelineStep against
// the unsplit model (bit for bit at one replica, within float rounding with
// DDP over two), the loss on every rank, ClipGradNorm over the stages
// against the whole model's, and the calls the mode refuses.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/ops.h"
#include "tensor/optim/clip_grad.h"
#include "tensor/optim/sgd.h"
#include "train/parallel/pipeline/pipeline_test_model.h"
#include "train/parallel/strategy.h"

namespace tandem::train {
namespace {

using namespace pipeline_test;  // NOLINT: test helpers
using ::testing::HasSubstr;

constexpr uint64_t kSeed = 29;
constexpr double kLr = 0.1;

absl::Status RunOnSim(int n, const sim::RankFn& fn) {
  sim::Options options;
  options.timeout = absl::Seconds(30);
  return sim::Run(n, fn, options).status();
}

PipelineLossFn MseLoss() {
  return [](const Tensor& y, const Tensor& t) { return Mse(y, t); };
}

absl::StatusOr<Tensor> Rows(const Tensor& t, int64_t first, int64_t count) {
  Shape shape = t.shape();
  shape[0] = count;
  TANDEM_ASSIGN_OR_RETURN(Tensor v, t.View(first * t.dim(1), shape));
  return v.Clone();
}

// What one run of a pipeline strategy left: each rank's stage weights and
// the losses PipelineStep returned there.
struct PipelineRun {
  std::vector<std::vector<float>> weights;        // by world rank
  std::vector<std::vector<double>> losses;        // by world rank, per step
  std::vector<double> clip_norms;                 // by world rank (if asked)
  std::vector<std::vector<float>> clipped_grads;  // by world rank (if asked)
};

// `stages` x `replicas` ranks train `steps` steps of `rows`-row global
// batches with `chunks` micro-batches per replica share; with `clip`, the
// last step clips to max_norm `clip` before its update.
absl::StatusOr<PipelineRun> TrainPipeline(
    int stages, int replicas, int64_t chunks, int64_t rows, int steps,
    std::optional<double> clip = std::nullopt) {
  const int world = stages * replicas;
  PipelineRun run;
  run.weights.resize(world);
  run.losses.resize(world);
  run.clip_norms.resize(world);
  run.clipped_grads.resize(world);
  TANDEM_RETURN_IF_ERROR(
      RunOnSim(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(PipelinePlacement at,
                                PlacePipeline(comm.size(), rank, replicas));
        auto [first, last] = StageBlocks(stages, at.stage);
        TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, first, last));
        TANDEM_ASSIGN_OR_RETURN(
            auto trainer,
            Strategy::CreatePipeline(comm, *model,
                                     {.schedule = PipelineSchedule::k1F1B,
                                      .chunks = chunks,
                                      .loss = MseLoss(),
                                      .replicas = replicas},
                                     SgdFactory(kLr)));
        const int64_t share = rows / replicas;
        for (int step = 0; step < steps; ++step) {
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(rows, kIn, step));
          TANDEM_ASSIGN_OR_RETURN(Tensor t, Batch(rows, kOut, 0.5 + step));
          TANDEM_ASSIGN_OR_RETURN(Tensor my_x,
                                  Rows(x, at.replica * share, share));
          TANDEM_ASSIGN_OR_RETURN(Tensor my_t,
                                  Rows(t, at.replica * share, share));
          trainer->ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(double loss,
                                  trainer->PipelineStep(my_x, my_t));
          run.losses[rank].push_back(loss);
          if (clip.has_value() && step == steps - 1) {
            TANDEM_ASSIGN_OR_RETURN(run.clip_norms[rank],
                                    trainer->ClipGradNorm(*clip));
            run.clipped_grads[rank] = Flat(*model, /*grads=*/true);
          }
          TANDEM_RETURN_IF_ERROR(trainer->Step());
        }
        run.weights[rank] = Flat(*model, /*grads=*/false);
        return absl::OkStatus();
      }));
  return run;
}

// The whole model trained the same way on the full batch (micro-batches of
// the full batch in order); its losses, and with `clip` the norm and the
// clipped gradients of the last step.
struct Reference {
  std::unique_ptr<nn::Sequential> model;
  std::vector<double> losses;
  double clip_norm = 0;
  std::vector<float> clipped_grads;
};

absl::StatusOr<Reference> TrainReference(int64_t chunks, int64_t rows,
                                         int steps,
                                         std::optional<double> clip = {}) {
  Reference ref;
  TANDEM_ASSIGN_OR_RETURN(ref.model, Blocks(kSeed, 0, kBlocks));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(ref.model->Parameters(), kLr));
  for (int step = 0; step < steps; ++step) {
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(rows, kIn, step));
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Batch(rows, kOut, 0.5 + step));
    ref.model->ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(double loss,
                            ReferenceStep(*ref.model, x, t, chunks));
    ref.losses.push_back(loss);
    if (clip.has_value() && step == steps - 1) {
      TANDEM_ASSIGN_OR_RETURN(
          ref.clip_norm, optim::ClipGradNorm(ref.model->Parameters(), *clip));
      ref.clipped_grads = Flat(*ref.model, /*grads=*/true);
    }
    TANDEM_RETURN_IF_ERROR(sgd.Step());
  }
  return ref;
}

// Elements [begin, end) of the whole model's flat parameters that stage
// `stage` of `stages` holds (its blocks: a Linear's weight and bias each).
std::vector<float> StageSlice(const std::vector<float>& whole, int64_t stages,
                              int64_t stage) {
  auto offset = [](int64_t block) {
    int64_t n = 0;
    for (int64_t b = 0; b < block; ++b) {
      const int64_t in = b == 0 ? kIn : kHidden;
      const int64_t out = b == kBlocks - 1 ? kOut : kHidden;
      n += in * out + out;
    }
    return n;
  };
  auto [first, last] = StageBlocks(stages, stage);
  return std::vector<float>(whole.begin() + offset(first),
                            whole.begin() + offset(last));
}

TEST(PipelinePlacementTest, ReplicaMajorStageMinor) {
  absl::StatusOr<PipelinePlacement> at = PlacePipeline(6, 4, 2);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->stages, 3);
  EXPECT_EQ(at->replicas, 2);
  EXPECT_EQ(at->replica, 1);
  EXPECT_EQ(at->stage, 1);
  EXPECT_FALSE(at->first_stage());
  EXPECT_FALSE(at->last_stage());
  at = PlacePipeline(6, 5, 2);
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_TRUE(at->last_stage());
  for (int64_t replicas : {0, 4, 7}) {
    at = PlacePipeline(6, 0, replicas);
    ASSERT_FALSE(at.ok()) << replicas;
    EXPECT_EQ(at.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(at.status().message(), HasSubstr("multiple of the replica"));
  }
}

// One replica: the stages' weights after three steps equal the unsplit
// model's bit for bit, and every rank returns the reference's loss.
TEST(StrategyPipelineTest, StagesEqualTheUnsplitModelBitForBit) {
  constexpr int kStages = 2, kSteps = 3;
  constexpr int64_t kChunks = 3, kRows = 9;
  absl::StatusOr<PipelineRun> run =
      TrainPipeline(kStages, 1, kChunks, kRows, kSteps);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<Reference> ref = TrainReference(kChunks, kRows, kSteps);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::vector<float> whole = Flat(*ref->model, /*grads=*/false);
  for (int s = 0; s < kStages; ++s) {
    EXPECT_EQ(run->weights[s], StageSlice(whole, kStages, s)) << "stage " << s;
    ASSERT_EQ(run->losses[s].size(), ref->losses.size());
    for (size_t i = 0; i < ref->losses.size(); ++i) {
      EXPECT_DOUBLE_EQ(run->losses[s][i], ref->losses[i])
          << "stage " << s << " step " << i;
    }
  }
}

// 2 stages x 2 replicas on a 12-row batch (6 rows, 2 micro-batches per
// replica): DDP averages each stage over its replicas, so the weights match
// the unsplit model on the full batch in 4 micro-batches up to the order of
// the float sums; the replicas agree bit for bit, and every rank returns
// the same loss, the replicas' mean.
TEST(StrategyPipelineTest, ReplicasAverageLikeTheFullBatch) {
  constexpr int kStages = 2, kReplicas = 2, kSteps = 3;
  absl::StatusOr<PipelineRun> run =
      TrainPipeline(kStages, kReplicas, 2, 12, kSteps);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<Reference> ref = TrainReference(4, 12, kSteps);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::vector<float> whole = Flat(*ref->model, /*grads=*/false);
  for (int rank = 0; rank < kStages * kReplicas; ++rank) {
    const int stage = rank % kStages;
    EXPECT_EQ(run->weights[rank], run->weights[stage]) << "rank " << rank;
    const std::vector<float> want = StageSlice(whole, kStages, stage);
    ASSERT_EQ(run->weights[rank].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(run->weights[rank][i], want[i], 1e-6) << "rank " << rank;
    }
    EXPECT_EQ(run->losses[rank], run->losses[0]) << "rank " << rank;
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(run->losses[rank][step], ref->losses[step], 1e-6);
    }
  }
}

// ClipGradNorm under pipeline: the whole model's norm on every rank (one
// all-reduce over the stages) and the same clipped gradients.
TEST(StrategyPipelineTest, ClipGradNormIsTheWholeModels) {
  constexpr int kStages = 2, kSteps = 2;
  constexpr double kMaxNorm = 0.01;  // below the norm: it clips
  absl::StatusOr<PipelineRun> run =
      TrainPipeline(kStages, 1, 3, 9, kSteps, kMaxNorm);
  ASSERT_TRUE(run.ok()) << run.status();
  absl::StatusOr<Reference> ref = TrainReference(3, 9, kSteps, kMaxNorm);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_GT(ref->clip_norm, 10 * kMaxNorm);
  EXPECT_EQ(run->clip_norms[0], run->clip_norms[1]);
  EXPECT_NEAR(run->clip_norms[0], ref->clip_norm, 1e-6 * ref->clip_norm);
  for (int s = 0; s < kStages; ++s) {
    const std::vector<float> want = StageSlice(ref->clipped_grads, kStages, s);
    ASSERT_EQ(run->clipped_grads[s].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(run->clipped_grads[s][i], want[i], 1e-7) << "stage " << s;
    }
  }
}

TEST(StrategyPipelineTest, RefusesWhatAStageCannotDo) {
  absl::Status status =
      RunOnSim(2, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, 0, kBlocks));
        absl::StatusOr<std::unique_ptr<Strategy>> wrong = Strategy::Create(
            ShardMode::kPipeline, *model, comm, SgdFactory(kLr));
        EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(wrong.status().message(), HasSubstr("CreatePipeline"));
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp,
            Strategy::Create(ShardMode::kNone, *model, comm, SgdFactory(kLr)));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(4, kIn, 0));
        absl::StatusOr<double> step = ddp->PipelineStep(x, x);
        EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(step.status().message(),
                    HasSubstr("this one is none: use Forward and Backward"));

        auto [first, last] = StageBlocks(2, comm.rank());
        TANDEM_ASSIGN_OR_RETURN(auto stage, Blocks(kSeed, first, last));
        TANDEM_ASSIGN_OR_RETURN(
            auto pipe, Strategy::CreatePipeline(
                           comm, *stage, {.loss = MseLoss()}, SgdFactory(kLr)));
        EXPECT_EQ(pipe->mode(), ShardMode::kPipeline);
        EXPECT_EQ(ShardModeName(pipe->mode()), "pipeline");
        EXPECT_EQ(pipe->pipeline_placement()->stage, comm.rank());
        EXPECT_NE(pipe->pipeline_stage(), nullptr);
        EXPECT_FALSE(pipe->NoSync().has_value());
        EXPECT_EQ(pipe->full_optimizer(), nullptr);
        EXPECT_NE(pipe->local_optimizer(), nullptr);
        EXPECT_TRUE(pipe->FullParamGroups().empty());
        EXPECT_FALSE(pipe->last_pipeline_result().has_value());
        const std::vector<absl::Status> refused = {
            pipe->Forward(x).status(),
            pipe->Backward(x),
            pipe->FullModelState().status(),
            pipe->FullOptimizerState().status(),
            pipe->LoadFullModelState({}),
            pipe->LoadFullOptimizerState({})};
        for (const absl::Status& s : refused) {
          EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
          EXPECT_THAT(s.message(), HasSubstr("under the pipeline strategy"));
        }
        EXPECT_THAT(refused[0].message(), HasSubstr("Forward is not"));
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace tandem::train
