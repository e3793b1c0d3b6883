// The rank pipeline on the simulated cluster: schedules, GPipe == 1F1B ==
// the unsplit model (bitwise), activation memory per schedule, and the
// agreement errors.
#include "train/parallel/pipeline/pipeline.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "train/parallel/pipeline/pipeline_test_model.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;
using namespace pipeline_test;  // NOLINT: test helpers
using Kind = PipelineAction::Kind;

constexpr uint64_t kSeed = 11;
constexpr int kSteps = 3;

TEST(PipelineOrderTest, GpipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(PipelineOrder(PipelineSchedule::kGPipe, 2, 0, 2),
            (std::vector<PipelineAction>{{Kind::kForward, 0},
                                         {Kind::kForward, 1},
                                         {Kind::kBackward, 0},
                                         {Kind::kBackward, 1}}));
}

TEST(PipelineOrderTest, OneFOneBWarmsUpThenAlternates) {
  // 3 stages, 4 micro-batches: stage 0 warms up with 2 forwards.
  EXPECT_EQ(PipelineOrder(PipelineSchedule::k1F1B, 3, 0, 4),
            (std::vector<PipelineAction>{{Kind::kForward, 0},
                                         {Kind::kForward, 1},
                                         {Kind::kForward, 2},
                                         {Kind::kBackward, 0},
                                         {Kind::kForward, 3},
                                         {Kind::kBackward, 1},
                                         {Kind::kBackward, 2},
                                         {Kind::kBackward, 3}}));
  // The last stage alternates from the start.
  EXPECT_EQ(PipelineOrder(PipelineSchedule::k1F1B, 3, 2, 2),
            (std::vector<PipelineAction>{{Kind::kForward, 0},
                                         {Kind::kBackward, 0},
                                         {Kind::kForward, 1},
                                         {Kind::kBackward, 1}}));
  // Fewer micro-batches than the warm-up: all forwards, then backwards.
  EXPECT_EQ(PipelineOrder(PipelineSchedule::k1F1B, 4, 0, 2),
            PipelineOrder(PipelineSchedule::kGPipe, 4, 0, 2));
}

TEST(PipelineScheduleTest, ParsesItsNames) {
  EXPECT_EQ(ParsePipelineSchedule("1f1b").value(), PipelineSchedule::k1F1B);
  EXPECT_EQ(PipelineScheduleName(ParsePipelineSchedule("gpipe").value()),
            "gpipe");
  EXPECT_THAT(ParsePipelineSchedule("interleaved").status().message(),
              HasSubstr("'gpipe' or '1f1b', got 'interleaved'"));
}

// What one pipeline run leaves: per stage, the gradients after the first
// step, the weights after the last, the peak live micro-batches of the
// first step and the last stage's losses.
struct RunOutput {
  std::vector<std::vector<float>> grads, weights;
  std::vector<int64_t> peak_live;
  std::vector<double> losses;
  std::vector<std::vector<double>> shared;  // ShareLoss on each rank
  std::vector<absl::Status> statuses;
};

RunOutput RunPipeline(int stages, PipelineSchedule schedule, int64_t chunks,
                      int64_t rows) {
  RunOutput out;
  out.grads.resize(stages);
  out.weights.resize(stages);
  out.peak_live.resize(stages);
  out.shared.resize(stages);
  sim::Options options;
  options.timeout = absl::Seconds(30);
  sim::RunResult r = sim::Run(
      stages,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        auto [first, last] = StageBlocks(stages, rank);
        TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, first, last));
        TANDEM_ASSIGN_OR_RETURN(
            auto stage,
            PipelineStage::Create(
                comm, *model, {.schedule = schedule, .chunks = chunks},
                [](const Tensor& y, const Tensor& t) { return Mse(y, t); }));
        TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                                optim::Sgd::Create(model->Parameters(), 0.1));
        for (int step = 0; step < kSteps; ++step) {
          Tensor x, t;
          if (rank == 0) {
            TANDEM_ASSIGN_OR_RETURN(x, Batch(rows, kIn, step));
          }
          if (rank == stages - 1) {
            TANDEM_ASSIGN_OR_RETURN(t, Batch(rows, kOut, 0.5 + step));
          }
          model->ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(PipelineStepResult res, stage->Step(x, t));
          if (step == 0) {
            out.grads[rank] = Flat(*model, /*grads=*/true);
            out.peak_live[rank] = res.peak_live_micro_batches;
          }
          if (rank == stages - 1) out.losses.push_back(*res.loss);
          TANDEM_ASSIGN_OR_RETURN(const double shared, stage->ShareLoss(res));
          out.shared[rank].push_back(shared);
          TANDEM_RETURN_IF_ERROR(sgd.Step());
        }
        out.weights[rank] = Flat(*model, /*grads=*/false);
        return absl::OkStatus();
      },
      options);
  out.statuses = r.ranks;
  EXPECT_TRUE(r.launch.ok()) << r.launch;
  return out;
}

// The unsplit model: gradients after step 0, weights after the last step.
struct Reference {
  std::vector<float> grads, weights;
  std::vector<double> losses;
};

Reference RunReference(int64_t chunks, int64_t rows) {
  Reference ref;
  auto model = Blocks(kSeed, 0, kBlocks).value();
  optim::Sgd sgd = optim::Sgd::Create(model->Parameters(), 0.1).value();
  for (int step = 0; step < kSteps; ++step) {
    Tensor x = Batch(rows, kIn, step).value();
    Tensor t = Batch(rows, kOut, 0.5 + step).value();
    model->ZeroGrad();
    absl::StatusOr<double> loss = ReferenceStep(*model, x, t, chunks);
    EXPECT_TRUE(loss.ok()) << loss.status();
    ref.losses.push_back(loss.value_or(0));
    if (step == 0) ref.grads = Flat(*model, /*grads=*/true);
    EXPECT_TRUE(sgd.Step().ok());
  }
  ref.weights = Flat(*model, /*grads=*/false);
  return ref;
}

std::vector<float> Concat(const std::vector<std::vector<float>>& parts) {
  std::vector<float> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

// Stages, chunks, rows: 9 rows split unevenly for every chunk count but 1
// and 3 (tensor_split: 9 / 4 = 3, 2, 2, 2).
class PipelineEquivalenceTest
    : public ::testing::TestWithParam<std::tuple<int, int64_t, int64_t>> {};

TEST_P(PipelineEquivalenceTest, GpipeEqualsOneFOneBEqualsUnsplitBitwise) {
  const auto [stages, chunks, rows] = GetParam();
  RunOutput gpipe = RunPipeline(stages, PipelineSchedule::kGPipe, chunks, rows);
  RunOutput ofob = RunPipeline(stages, PipelineSchedule::k1F1B, chunks, rows);
  for (int r = 0; r < stages; ++r) {
    ASSERT_TRUE(gpipe.statuses[r].ok()) << gpipe.statuses[r];
    ASSERT_TRUE(ofob.statuses[r].ok()) << ofob.statuses[r];
  }
  const Reference ref = RunReference(chunks, rows);
  // Same arithmetic in the same order: exact equality, not a tolerance.
  EXPECT_EQ(Concat(gpipe.grads), Concat(ofob.grads));
  EXPECT_EQ(Concat(gpipe.grads), ref.grads);
  EXPECT_EQ(Concat(gpipe.weights), Concat(ofob.weights));
  EXPECT_EQ(Concat(gpipe.weights), ref.weights);
  // The losses: the same values, averaged in the same order.
  EXPECT_EQ(gpipe.losses, ofob.losses);
  EXPECT_EQ(gpipe.losses, ref.losses);
  // ShareLoss gives every stage the last stage's loss, exactly.
  for (int r = 0; r < stages; ++r) EXPECT_EQ(ofob.shared[r], ofob.losses);
  // Activation memory: GPipe keeps every micro-batch, 1F1B at most p - i.
  for (int i = 0; i < stages; ++i) {
    EXPECT_EQ(gpipe.peak_live[i], chunks) << "stage " << i;
    EXPECT_EQ(ofob.peak_live[i], std::min<int64_t>(stages - i, chunks))
        << "stage " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(StagesChunksRows, PipelineEquivalenceTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values(1, 2, 3, 4, 5, 6,
                                                              7, 8),
                                            ::testing::Values(9)));

INSTANTIATE_TEST_SUITE_P(EvenBatch, PipelineEquivalenceTest,
                         ::testing::Values(std::make_tuple(2, 4, 8),
                                           std::make_tuple(4, 8, 16)));

// With the full batch's mean loss, the pipeline's average of equal
// micro-batch means is the same quantity summed in another order: equal
// within float rounding (a few ulps of the gradients' scale).
TEST(PipelineTest, EvenChunksMatchTheFullBatchGradientWithinRounding) {
  RunOutput pipe = RunPipeline(2, PipelineSchedule::k1F1B, 4, 8);
  auto model = Blocks(kSeed, 0, kBlocks).value();
  Tensor x = Batch(8, kIn, 0).value();
  Tensor t = Batch(8, kOut, 0.5).value();
  ASSERT_TRUE(Mse(model->Forward(x).value(), t).value().Backward().ok());
  const std::vector<float> full = Flat(*model, /*grads=*/true);
  const std::vector<float> got = Concat(pipe.grads);
  ASSERT_EQ(got.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_NEAR(got[i], full[i], 1e-6 + 1e-5 * std::abs(full[i])) << i;
  }
}

TEST(PipelineTest, MoreChunksThanRowsFailsEveryRank) {
  RunOutput out = RunPipeline(3, PipelineSchedule::kGPipe, 8, 5);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out.statuses[r].code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.statuses[r].message(),
                HasSubstr("chunks (8) is larger than the batch (5 rows)"));
  }
}

TEST(PipelineTest, ScaleGradsOffKeepsTheSum) {
  sim::RunResult r = sim::Run(2, [](int rank, comm::Communicator& comm) {
    auto [first, last] = StageBlocks(2, rank);
    TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, first, last));
    auto mse = [](const Tensor& y, const Tensor& t) { return Mse(y, t); };
    TANDEM_ASSIGN_OR_RETURN(
        auto summed,
        PipelineStage::Create(comm, *model, {.chunks = 2, .scale_grads = false},
                              mse));
    TANDEM_ASSIGN_OR_RETURN(
        auto scaled, PipelineStage::Create(comm, *model, {.chunks = 2}, mse));
    Tensor x, t;
    if (rank == 0) {
      TANDEM_ASSIGN_OR_RETURN(x, Batch(4, kIn, 0));
    }
    if (rank == 1) {
      TANDEM_ASSIGN_OR_RETURN(t, Batch(4, kOut, 0));
    }
    TANDEM_RETURN_IF_ERROR(summed->Step(x, t).status());
    const std::vector<float> sum = Flat(*model, true);
    model->ZeroGrad();
    TANDEM_RETURN_IF_ERROR(scaled->Step(x, t).status());
    const std::vector<float> mean = Flat(*model, true);
    for (size_t i = 0; i < sum.size(); ++i) {
      if (sum[i] / 2 != mean[i]) {
        return absl::InternalError(
            absl::StrCat("element ", i, ": ", sum[i], " / 2 != ", mean[i]));
      }
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
}

// Runs one step per rank with per-rank options; returns each rank's status.
std::vector<absl::Status> StepWith(
    int stages, const std::function<PipelineOptions(int)>& options_of,
    int64_t target_rows = 6) {
  sim::Options sim_options;
  sim_options.timeout = absl::Seconds(30);
  sim::RunResult r = sim::Run(
      stages,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        auto [first, last] = StageBlocks(stages, rank);
        TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, first, last));
        TANDEM_ASSIGN_OR_RETURN(
            auto stage,
            PipelineStage::Create(
                comm, *model, options_of(rank),
                [](const Tensor& y, const Tensor& t) { return Mse(y, t); }));
        Tensor x, t;
        if (rank == 0) {
          TANDEM_ASSIGN_OR_RETURN(x, Batch(6, kIn, 0));
        }
        if (rank == stages - 1) {
          TANDEM_ASSIGN_OR_RETURN(t, Batch(target_rows, kOut, 0));
        }
        return stage->Step(x, t).status();
      },
      sim_options);
  return r.ranks;
}

TEST(PipelineAgreementTest, ScheduleMismatchFailsEveryRankNamingBoth) {
  std::vector<absl::Status> s = StepWith(3, [](int rank) {
    PipelineOptions o;
    o.chunks = 2;
    o.schedule = rank == 1 ? PipelineSchedule::k1F1B : PipelineSchedule::kGPipe;
    return o;
  });
  for (const absl::Status& st : s) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(),
                HasSubstr("pipeline ranks disagree on the schedule: ranks 0, "
                          "2 have gpipe and rank 1 has 1f1b"));
  }
}

TEST(PipelineAgreementTest, ChunksMismatchFailsEveryRankNamingBoth) {
  std::vector<absl::Status> s = StepWith(
      2, [](int rank) { return PipelineOptions{.chunks = rank == 0 ? 2 : 3}; });
  for (const absl::Status& st : s) {
    EXPECT_THAT(st.message(),
                HasSubstr("disagree on the chunks (micro-batches per batch): "
                          "rank 0 has 2 and rank 1 has 3"))
        << st;
  }
}

TEST(PipelineAgreementTest, BatchAndTargetRowsMustMatch) {
  std::vector<absl::Status> s = StepWith(
      2, [](int) { return PipelineOptions{.chunks = 2}; }, /*target_rows=*/5);
  for (const absl::Status& st : s) {
    EXPECT_THAT(st.message(),
                HasSubstr("rank 0 has a batch of 6 rows but the last stage "
                          "(rank 1) has a target of 5 rows"))
        << st;
  }
}

TEST(PipelineStageTest, CreateChecksItsArguments) {
  sim::RunResult r = sim::Run(2, [](int rank, comm::Communicator& comm) {
    auto model = Blocks(kSeed, 0, 1).value();
    absl::Status chunks =
        PipelineStage::Create(comm, *model, {.chunks = 0}).status();
    if (!absl::StrContains(chunks.message(), "chunks must be >= 1, got 0")) {
      return absl::InternalError(chunks.ToString());
    }
    absl::Status no_loss = PipelineStage::Create(comm, *model, {}).status();
    if (rank == 1 &&
        !absl::StrContains(no_loss.message(), "needs a loss function")) {
      return absl::InternalError(no_loss.ToString());
    }
    if (rank == 0 && !no_loss.ok()) return no_loss;
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
}

// A stage whose layers do not fit the activations it receives fails with
// the stage, the micro-batch and the shapes named; the other rank fails
// too instead of hanging.
TEST(PipelineStageTest, AStageThatCannotRunNamesItselfAndNobodyHangs) {
  sim::Options options;
  options.timeout = absl::Seconds(30);
  sim::RunResult r = sim::Run(
      2,
      [](int rank, comm::Communicator& comm) -> absl::Status {
        // Stage 1 expects 5 features but stage 0 sends kHidden.
        Generator gen(1);
        auto model = std::make_unique<nn::Sequential>();
        TANDEM_RETURN_IF_ERROR(model->Append(
            nn::Linear::Create(rank == 0 ? kIn : 5, kHidden, gen)));
        TANDEM_ASSIGN_OR_RETURN(
            auto stage,
            PipelineStage::Create(
                comm, *model, {.chunks = 2},
                [](const Tensor& y, const Tensor& t) { return Mse(y, t); }));
        Tensor x, t;
        if (rank == 0) {
          TANDEM_ASSIGN_OR_RETURN(x, Batch(4, kIn, 0));
        }
        if (rank == 1) {
          TANDEM_ASSIGN_OR_RETURN(t, Batch(4, kHidden, 0));
        }
        return stage->Step(x, t).status();
      },
      options);
  ASSERT_FALSE(r.ranks[1].ok());
  EXPECT_THAT(r.ranks[1].message(),
              HasSubstr("pipeline stage 1 of 2 (rank 1), forward of "
                        "micro-batch 0"));
  EXPECT_THAT(r.ranks[1].message(), HasSubstr("the output of stage 0"));
  EXPECT_FALSE(r.ranks[0].ok());
}

}  // namespace
}  // namespace tandem::train
