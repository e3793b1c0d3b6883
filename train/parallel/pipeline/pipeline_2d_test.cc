// 2-D parallelism on the simulated cluster: 4 ranks = 2 pipeline stages x 2
// data-parallel replicas, built with Communicator::Split; DDP averages each
// stage's gradients over its replicas (PrepareForBackward before the last
// backward, FinishGradientSync after it). Checked against the 1-D pipeline
// on the full batch, and on gloo (4 ranks as threads over localhost TCP)
// against sim bit for bit.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/gloo/gloo_thread_launcher.h"
#include "comm/launcher.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/pipeline/pipeline.h"
#include "train/parallel/pipeline/pipeline_test_model.h"

namespace tandem::train {
namespace {

using namespace pipeline_test;  // NOLINT: test helpers

constexpr uint64_t kSeed = 23;
constexpr int kSteps = 3;
constexpr int64_t kRows = 12;  // global batch; 6 rows per replica

absl::StatusOr<Tensor> Rows(const Tensor& t, int64_t first, int64_t count) {
  Shape shape = t.shape();
  shape[0] = count;
  TANDEM_ASSIGN_OR_RETURN(Tensor v, t.View(first * t.dim(1), shape));
  return v.Clone();
}

// The weights of each stage after kSteps SGD steps, indexed by stage.
using StageWeights = std::vector<std::vector<float>>;

// Runs fn on every rank of a world of n ranks; the first error.
using Runner = std::function<absl::Status(int n, const comm::RankFn& fn)>;

absl::Status RunOnSim(int n, const comm::RankFn& fn) {
  sim::Options options;
  options.timeout = absl::Seconds(30);
  return sim::Run(n, fn, options).status();
}

absl::Status RunOnGloo(int n, const comm::RankFn& fn) {
  comm::GlooThreadLauncher launcher(absl::Seconds(30));
  return comm::MostTellingStatus(launcher.Run(n, fn));
}

// Runs `stages` x `replicas` ranks (rank = replica * stages + stage) with
// `run`; each replica pipelines its contiguous share of every global batch
// with `chunks` micro-batches. Returns replica 0's weights (after checking
// that every replica holds the same).
absl::StatusOr<StageWeights> Train(int stages, int replicas, int64_t chunks,
                                   PipelineSchedule schedule,
                                   const Runner& run = RunOnSim) {
  std::vector<std::vector<std::vector<float>>> weights(
      replicas, std::vector<std::vector<float>>(stages));
  absl::Status r = run(
      stages * replicas,
      [&](int rank, comm::Communicator& world) -> absl::Status {
        const int replica = rank / stages, stage = rank % stages;
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> pipe,
                                world.Split(replica, stage));
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> dp,
                                world.Split(stage, replica));
        auto [first, last] = StageBlocks(stages, stage);
        TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, first, last));
        std::unique_ptr<DistributedDataParallel> ddp;
        PipelineOptions po{.schedule = schedule, .chunks = chunks};
        if (replicas > 1) {
          TANDEM_ASSIGN_OR_RETURN(ddp,
                                  DistributedDataParallel::Create(*model, *dp));
          po.before_last_backward = [&] { return ddp->PrepareForBackward(); };
          po.after_last_backward = [&] { return ddp->FinishGradientSync(); };
        }
        TANDEM_ASSIGN_OR_RETURN(
            auto pipeline,
            PipelineStage::Create(
                *pipe, *model, po,
                [](const Tensor& y, const Tensor& t) { return Mse(y, t); }));
        TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                                optim::Sgd::Create(model->Parameters(), 0.1));
        const int64_t share = kRows / replicas;
        for (int step = 0; step < kSteps; ++step) {
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(kRows, kIn, step));
          TANDEM_ASSIGN_OR_RETURN(Tensor t, Batch(kRows, kOut, 0.5 + step));
          TANDEM_ASSIGN_OR_RETURN(x, Rows(x, replica * share, share));
          TANDEM_ASSIGN_OR_RETURN(t, Rows(t, replica * share, share));
          model->ZeroGrad();
          TANDEM_RETURN_IF_ERROR(pipeline->Step(x, t).status());
          TANDEM_RETURN_IF_ERROR(sgd.Step());
        }
        weights[replica][stage] = Flat(*model, /*grads=*/false);
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(r);
  for (int rep = 1; rep < replicas; ++rep) {
    if (weights[rep] != weights[0]) {
      return absl::InternalError(
          absl::StrCat("replica ", rep, " differs from replica 0"));
    }
  }
  return weights[0];
}

class Pipeline2dTest : public ::testing::TestWithParam<PipelineSchedule> {};

TEST_P(Pipeline2dTest, TwoStagesTimesTwoReplicasMatchTheOneDPipeline) {
  // 2 x 2 with 3 micro-batches of 2 rows per replica; the 1-D pipeline
  // splits the full 12 rows into the same 6 micro-batches.
  absl::StatusOr<StageWeights> two_d = Train(2, 2, 3, GetParam());
  ASSERT_TRUE(two_d.ok()) << two_d.status();
  absl::StatusOr<StageWeights> one_d = Train(2, 1, 6, GetParam());
  ASSERT_TRUE(one_d.ok()) << one_d.status();
  // Equal in exact arithmetic: the 1-D pipeline sums the 6 micro-batches'
  // gradients and divides by 6; the 2-D one sums 3 per replica, divides by
  // 3, and DDP averages the two replicas. Float32 rounds those sums in a
  // different order: a few ulps (2^-23 relative) per gradient, carried
  // through 3 SGD steps at lr 0.1 on weights of order 0.1-1, so 1e-6
  // absolute plus 1e-5 relative is loose enough and far below any real
  // error (a missing replica or micro-batch changes weights by ~1e-2).
  ASSERT_EQ(two_d->size(), one_d->size());
  for (size_t s = 0; s < one_d->size(); ++s) {
    ASSERT_EQ((*two_d)[s].size(), (*one_d)[s].size());
    for (size_t i = 0; i < (*one_d)[s].size(); ++i) {
      const float want = (*one_d)[s][i];
      EXPECT_NEAR((*two_d)[s][i], want, 1e-6 + 1e-5 * std::abs(want))
          << "stage " << s << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, Pipeline2dTest,
                         ::testing::Values(PipelineSchedule::kGPipe,
                                           PipelineSchedule::k1F1B));

// The same 2 x 2 training on gloo (sub-communicators from GlooCommunicator::
// Split, stages linked by its Send/Recv, DDP over its AllReduce): the same
// weights as on sim, bit for bit, under both schedules.
TEST_P(Pipeline2dTest, OnGlooEqualsSimBitwise) {
  absl::StatusOr<StageWeights> sim = Train(2, 2, 3, GetParam(), RunOnSim);
  ASSERT_TRUE(sim.ok()) << sim.status();
  absl::StatusOr<StageWeights> gloo = Train(2, 2, 3, GetParam(), RunOnGloo);
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_EQ(*gloo, *sim);
}

// GPipe and 1F1B stay bitwise equal in 2-D too: same per-stage order.
TEST(Pipeline2dScheduleTest, GpipeEqualsOneFOneBBitwise) {
  absl::StatusOr<StageWeights> gpipe = Train(2, 2, 3, PipelineSchedule::kGPipe);
  absl::StatusOr<StageWeights> ofob = Train(2, 2, 3, PipelineSchedule::k1F1B);
  ASSERT_TRUE(gpipe.ok()) << gpipe.status();
  ASSERT_TRUE(ofob.ok()) << ofob.status();
  EXPECT_EQ(*gpipe, *ofob);
}

// Without the DDP hooks the replicas drift apart: the test above would see
// it (a guard that the 2-D check is not vacuous).
TEST(Pipeline2dScheduleTest, ReplicasWithoutGradientSyncDiffer) {
  std::vector<std::vector<float>> w(2);
  sim::RunResult r = sim::Run(4, [&](int rank, comm::Communicator& world) {
    const int replica = rank / 2, stage = rank % 2;
    TANDEM_ASSIGN_OR_RETURN(auto pipe, world.Split(replica, stage));
    auto [first, last] = StageBlocks(2, stage);
    TANDEM_ASSIGN_OR_RETURN(auto model, Blocks(kSeed, first, last));
    TANDEM_ASSIGN_OR_RETURN(
        auto pipeline,
        PipelineStage::Create(
            *pipe, *model, {.chunks = 3},
            [](const Tensor& y, const Tensor& t) { return Mse(y, t); }));
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(kRows, kIn, 0));
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Batch(kRows, kOut, 0.5));
    TANDEM_ASSIGN_OR_RETURN(x, Rows(x, replica * 6, 6));
    TANDEM_ASSIGN_OR_RETURN(t, Rows(t, replica * 6, 6));
    TANDEM_RETURN_IF_ERROR(pipeline->Step(x, t).status());
    if (stage == 0) w[replica] = Flat(*model, /*grads=*/true);
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(w[0], w[1]);
}

}  // namespace
}  // namespace tandem::train
