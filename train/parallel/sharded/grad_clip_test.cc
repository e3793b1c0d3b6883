// ClipGradNorm under DDP (local), ZeRO-1, ZeRO-2 and FSDP (sharded: one
// all-reduce of the norm's parts) on 1..4 simulated ranks, against the
// unsharded norm: one process that averages the ranks' gradients itself.
// The model has 7*5+7 + 3*7+3 = 66 parameters in two layers (FSDP units)
// and, with the bucket caps below, two DDP buckets of 3 and 63 elements,
// so at 3 and 4 ranks the shards are uneven and padded.
#include "train/parallel/sharded/grad_clip.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
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
#include "tensor/optim/grad_scaler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/core/found_inf.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/sharded/fsdp.h"
#include "train/parallel/sharded/zero_optimizer.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr double kMaxNorm = 0.05;  // below every norm here: clipping acts
constexpr double kInf = std::numeric_limits<double>::infinity();

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(7);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(5, 7, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(7, 3, gen)));
  return model;
}

// Rank r's batch.
absl::StatusOr<Tensor> Batch(int rank) {
  Generator gen(1000 + static_cast<uint64_t>(rank));
  std::vector<float> values(4 * 5);
  gen.Uniform(values.data(), 20, -1.f, 1.f);
  return Tensor::FromVector(values, {4, 5});
}

absl::StatusOr<Tensor> Loss(const Tensor& y) {
  TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
  return Mean(sq);
}

std::vector<float> Flatten(const std::vector<Tensor>& params) {
  std::vector<float> out;
  for (const Tensor& p : params) {
    std::vector<float> v = *p.ToVector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

struct Result {
  std::vector<double> norms;  // per rank
  std::vector<float> params;  // rank 0's, after the clipped step
};

// The truth: one model, every rank's batch, gradients averaged by hand,
// optim::ClipGradNorm, one Sgd step.
absl::StatusOr<Result> Unsharded(int world, double norm_type) {
  TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
  for (int r = 0; r < world; ++r) {
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(r));
    TANDEM_ASSIGN_OR_RETURN(Tensor y, model->Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
    TANDEM_RETURN_IF_ERROR(loss.Backward());
  }
  for (const Tensor& p : model->Parameters()) {
    TANDEM_RETURN_IF_ERROR(ScaleInPlace(p.grad(), 1.0 / world));
  }
  Result out;
  TANDEM_ASSIGN_OR_RETURN(double norm,
                          optim::ClipGradNorm(model->Parameters(), kMaxNorm,
                                              {.norm_type = norm_type}));
  out.norms.push_back(norm);
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(model->Parameters(), 0.1));
  TANDEM_RETURN_IF_ERROR(sgd.Step());
  out.params = Flatten(model->Parameters());
  return out;
}

enum class Mode { kDdp, kZero1, kZero2, kFsdp };

std::string ModeName(Mode m) {
  switch (m) {
    case Mode::kDdp:
      return "ddp";
    case Mode::kZero1:
      return "zero1";
    case Mode::kZero2:
      return "zero2";
    case Mode::kFsdp:
      return "fsdp";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<optim::Optimizer>> MakeSgd(
    std::vector<Tensor> params) {
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(std::move(params), 0.1));
  return std::make_unique<optim::Sgd>(std::move(sgd));
}

// One step of `mode` on `world` sim ranks: backward, clip, step. With
// `amp`, the loss is scaled by a GradScaler (2^10) and the order is
// Backward, Unscale, clip, GradScaler::Step (ZeRO-2 takes its gradient
// slices before Unscale).
absl::StatusOr<Result> Distributed(int world, Mode mode, double norm_type,
                                   bool amp = false) {
  Result out;
  out.norms.resize(world);
  const optim::ClipGradNormOptions clip{.norm_type = norm_type};
  sim::RunResult result =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Batch(rank));
        TANDEM_ASSIGN_OR_RETURN(
            optim::GradScaler scaler,
            optim::GradScaler::Create({.init_scale = 1024.0, .enabled = amp}));
        scaler.set_found_inf_combiner(FoundInfAcrossRanks(comm, Device::CPU()));
        // Backward of the (scaled) loss; then `before_clip` (Unscale).
        auto scaled = [&](const Tensor& y) -> absl::StatusOr<Tensor> {
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
          return scaler.Scale(loss);
        };
        auto step = [&](optim::Optimizer& opt) -> absl::Status {
          return scaler.Step(opt).status();
        };
        double norm = 0;
        if (mode == Mode::kFsdp) {
          TANDEM_ASSIGN_OR_RETURN(
              auto fsdp, FullyShardedDataParallel::Create(*model, comm));
          TANDEM_ASSIGN_OR_RETURN(auto sgd, MakeSgd(fsdp->ShardParameters()));
          TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, scaled(y));
          TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
          if (amp) TANDEM_RETURN_IF_ERROR(scaler.Unscale(*sgd));
          TANDEM_ASSIGN_OR_RETURN(norm, fsdp->ClipGradNorm(kMaxNorm, clip));
          TANDEM_RETURN_IF_ERROR(step(*sgd));
          TANDEM_ASSIGN_OR_RETURN(nn::StateDict state, fsdp->FullStateDict());
          if (rank == 0) {
            std::vector<Tensor> params;
            for (const nn::NamedTensor& nt : state) params.push_back(nt.tensor);
            out.params = Flatten(params);
          }
        } else {
          DdpOptions options;
          options.first_bucket_cap_bytes = 64;  // buckets of 3 and 63
          options.bucket_cap_bytes = 256;
          TANDEM_ASSIGN_OR_RETURN(
              auto ddp, DistributedDataParallel::Create(*model, comm, options));
          std::unique_ptr<optim::Optimizer> full;
          std::unique_ptr<ZeroRedundancyOptimizer> zero;
          if (mode == Mode::kDdp) {
            TANDEM_ASSIGN_OR_RETURN(full, MakeSgd(model->Parameters()));
          } else {
            TANDEM_ASSIGN_OR_RETURN(
                zero, ZeroRedundancyOptimizer::Create(
                          *ddp, MakeSgd,
                          {.reduce_scatter_gradients = mode == Mode::kZero2}));
          }
          TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, scaled(y));
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          if (zero) {
            optim::Optimizer& local = *zero->local_optimizer();
            if (amp) {
              TANDEM_RETURN_IF_ERROR(zero->TakeShardGradients());
              TANDEM_RETURN_IF_ERROR(scaler.Unscale(local));
            }
            TANDEM_ASSIGN_OR_RETURN(norm, zero->ClipGradNorm(kMaxNorm, clip));
            // zero->Step() steps the local optimizer itself: skip it when
            // the (agreed) found_inf says so, as GradScaler::Step would.
            if (!scaler.found_inf()) TANDEM_RETURN_IF_ERROR(zero->Step());
          } else {
            // DDP: the averaged gradients agree, so the local clip is right.
            if (amp) TANDEM_RETURN_IF_ERROR(scaler.Unscale(*full));
            TANDEM_ASSIGN_OR_RETURN(
                norm, optim::ClipGradNorm(model->Parameters(), kMaxNorm, clip));
            TANDEM_RETURN_IF_ERROR(step(*full));
          }
          if (rank == 0) out.params = Flatten(model->Parameters());
        }
        if (amp) {
          if (scaler.found_inf()) {
            return absl::InternalError("found_inf on finite gradients");
          }
          TANDEM_RETURN_IF_ERROR(scaler.Update());
        }
        out.norms[rank] = norm;
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(result.status());
  return out;
}

void ExpectRelNear(const std::vector<float>& got,
                   const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0f, std::abs(want[i])))
        << what << " element " << i;
  }
}

class GradClipTest
    : public ::testing::TestWithParam<std::tuple<int, Mode, double>> {};

TEST_P(GradClipTest, NormAndStepMatchTheUnshardedRun) {
  const auto [world, mode, norm_type] = GetParam();
  absl::StatusOr<Result> truth = Unsharded(world, norm_type);
  ASSERT_TRUE(truth.ok()) << truth.status();
  ASSERT_GT(truth->norms[0], kMaxNorm);
  absl::StatusOr<Result> run = Distributed(world, mode, norm_type);
  ASSERT_TRUE(run.ok()) << run.status();
  for (int r = 0; r < world; ++r) {
    // The same on every rank, bit for bit; the unsharded norm within 1e-6.
    EXPECT_EQ(run->norms[r], run->norms[0]) << "rank " << r;
    EXPECT_NEAR(run->norms[r], truth->norms[0], 1e-6 * truth->norms[0])
        << "rank " << r;
  }
  ExpectRelNear(run->params, truth->params, "params vs unsharded");
  if (mode != Mode::kDdp) {
    absl::StatusOr<Result> ddp = Distributed(world, Mode::kDdp, norm_type);
    ASSERT_TRUE(ddp.ok()) << ddp.status();
    EXPECT_NEAR(run->norms[0], ddp->norms[0], 1e-6 * ddp->norms[0]);
    ExpectRelNear(run->params, ddp->params, "params vs DDP");
  }
}

INSTANTIATE_TEST_SUITE_P(
    WorldSizes, GradClipTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4),
                       ::testing::Values(Mode::kDdp, Mode::kZero1, Mode::kZero2,
                                         Mode::kFsdp),
                       ::testing::Values(2.0, kInf)),
    [](const auto& info) {
      return absl::StrCat("world", std::get<0>(info.param), "_",
                          ModeName(std::get<1>(info.param)),
                          std::isinf(std::get<2>(info.param)) ? "_inf" : "_l2");
    });

// Under AMP (f32 gradients of a loss scaled by 2^10): Unscale, then clip,
// then step. The unscaled gradients are the unscaled run's exactly (a power
// of two), so the norm and the weights equal the run without AMP.
class GradClipAmpTest : public ::testing::TestWithParam<Mode> {};

TEST_P(GradClipAmpTest, ClipAfterUnscaleEqualsTheRunWithoutAmp) {
  constexpr int kWorld = 3;
  absl::StatusOr<Result> plain = Distributed(kWorld, GetParam(), 2.0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<Result> amp = Distributed(kWorld, GetParam(), 2.0, true);
  ASSERT_TRUE(amp.ok()) << amp.status();
  EXPECT_EQ(amp->norms, plain->norms);
  EXPECT_EQ(amp->params, plain->params);
}

INSTANTIATE_TEST_SUITE_P(Modes, GradClipAmpTest,
                         ::testing::Values(Mode::kDdp, Mode::kZero1,
                                           Mode::kZero2, Mode::kFsdp),
                         [](const auto& info) { return ModeName(info.param); });

// A NaN gradient on one rank's shard makes the total NaN on every rank (as
// unsharded), also for the max norm; with error_if_nonfinite every rank
// refuses and nothing is scaled.
TEST(ClipShardedGradNormTest, NonFinitePartReachesEveryRank) {
  constexpr int kWorld = 3;
  for (const double p : {2.0, kInf}) {
    for (const bool refuse : {false, true}) {
      std::vector<double> norms(kWorld, 0);
      std::vector<double> untouched(kWorld, 0);
      std::vector<std::string> errors(kWorld);
      sim::RunResult result = sim::Run(
          kWorld, [&](int rank, comm::Communicator& comm) -> absl::Status {
            const float mine = rank == 1 ? std::nanf("") : 0.5f;
            TANDEM_ASSIGN_OR_RETURN(Tensor g,
                                    Tensor::FromVector<float>({mine, 2.0f}));
            absl::StatusOr<double> norm = ClipShardedGradNorm(
                comm, Device::CPU(), {g}, 1.0,
                {.norm_type = p, .error_if_nonfinite = refuse});
            if (norm.ok()) {
              norms[rank] = *norm;
            } else {
              errors[rank] = std::string(norm.status().message());
            }
            untouched[rank] = g.ToVector<float>()->at(1);
            return absl::OkStatus();
          });
      ASSERT_TRUE(result.status().ok()) << result.status();
      for (int r = 0; r < kWorld; ++r) {
        if (refuse) {
          EXPECT_THAT(errors[r], HasSubstr("is nan")) << "rank " << r;
          EXPECT_EQ(untouched[r], 2.0) << "rank " << r;
        } else {
          EXPECT_TRUE(std::isnan(norms[r])) << "rank " << r << " p " << p;
          EXPECT_TRUE(std::isnan(untouched[r])) << "rank " << r;
        }
      }
    }
  }
}

// A rank that cannot measure its shard (an f16 gradient) fails, and so do
// its peers, instead of waiting or clipping with a wrong norm.
TEST(ClipShardedGradNormTest, ALocalErrorFailsEveryRank) {
  constexpr int kWorld = 2;
  std::vector<std::string> errors(kWorld);
  sim::RunResult result =
      sim::Run(kWorld, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(Tensor g, Tensor::FromVector<float>({1.0f}));
        if (rank == 1) {
          TANDEM_ASSIGN_OR_RETURN(g, g.To(DType::kF16));
        }
        absl::StatusOr<double> norm =
            ClipShardedGradNorm(comm, Device::CPU(), {g}, 1.0);
        errors[rank] = std::string(norm.status().message());
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
  EXPECT_THAT(errors[0], HasSubstr("another rank"));
  EXPECT_THAT(errors[1], HasSubstr("only f32 and f64"));
}

}  // namespace
}  // namespace tandem::train
