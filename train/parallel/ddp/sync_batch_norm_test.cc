// SyncBatchNorm at N sim ranks with b samples each against nn::BatchNorm2d
// at one rank with the N * b samples (sync_batch_norm_scenario.h); eval mode;
// ranks whose channel counts differ; ConvertSyncBatchNorm on a nested model.
#include "train/parallel/ddp/sync_batch_norm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/batch_norm.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/models/resnet.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/sync_batch_norm_scenario.h"

namespace tandem::train {
namespace {

using sync_bn_testing::Draw;
using sync_bn_testing::kC;
using sync_bn_testing::kH;
using sync_bn_testing::kW;
using sync_bn_testing::Rows;
using sync_bn_testing::SetAffine;

nn::BatchNorm2d::Options Opts() { return sync_bn_testing::Options(); }

// The scenario (sync_batch_norm_scenario.h) on the simulated cluster; the
// same runs under mpirun in sync_batch_norm_mpi_test.
class SyncBatchNormWorld : public ::testing::TestWithParam<int> {};

TEST_P(SyncBatchNormWorld, EqualsBatchNormOverTheGlobalBatch) {
  sim::RunResult run = sim::Run(GetParam(), [](int, comm::Communicator& comm) {
    return sync_bn_testing::CheckSyncBatchNormRank(comm);
  });
  EXPECT_TRUE(run.ok()) << run.status();
}

INSTANTIATE_TEST_SUITE_P(Worlds, SyncBatchNormWorld,
                         ::testing::Values(2, 3, 4));

TEST(SyncBatchNormTest, EvalEqualsBatchNorm2dWithNoCollective) {
  auto ref_bn = nn::BatchNorm2d::Create(kC, Opts());
  ASSERT_TRUE(ref_bn.ok());
  ASSERT_TRUE(SetAffine(**ref_bn).ok());
  // Non-trivial running statistics: one training forward first.
  auto x0 = Rows(Draw(4 * kC * kH * kW, 10), 0, 4);
  ASSERT_TRUE(x0.ok());
  ASSERT_TRUE((*ref_bn)->Forward(*x0).ok());
  (*ref_bn)->Eval();
  auto x = Rows(Draw(2 * kC * kH * kW, 11), 0, 2);
  ASSERT_TRUE(x.ok());
  auto want = (*ref_bn)->Forward(*x);
  ASSERT_TRUE(want.ok());
  auto want_v = want->ToVector<double>();
  const nn::StateDict state = (*ref_bn)->StateDict();

  // Ranks see different inputs in eval: any collective would mismatch.
  sim::RunResult run =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto bn,
                                SyncBatchNorm::Create(kC, Opts(), comm));
        TANDEM_RETURN_IF_ERROR(bn->LoadStateDict(state));
        bn->Eval();
        if (rank == 1) return absl::OkStatus();
        TANDEM_ASSIGN_OR_RETURN(Tensor y, bn->Forward(*x));
        TANDEM_ASSIGN_OR_RETURN(auto v, y.ToVector<double>());
        EXPECT_EQ(v, *want_v);  // the very same kernel: bit for bit
        return absl::OkStatus();
      });
  EXPECT_TRUE(run.ok()) << run.status();
}

TEST(SyncBatchNormTest, DifferentChannelCountsFailNamingBothShapes) {
  sim::Options options;
  options.timeout = absl::Seconds(30);
  sim::RunResult run = sim::Run(
      2,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        const int64_t c = rank == 0 ? 3 : 4;
        TANDEM_ASSIGN_OR_RETURN(
            auto bn, SyncBatchNorm::Create(c, Opts(), comm, absl::Seconds(30)));
        TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                Tensor::Ones({2, c, 2, 2}, DType::kF64));
        return bn->Forward(x).status();
      },
      options);
  ASSERT_EQ(run.ranks.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(run.ranks[r].code(), absl::StatusCode::kInvalidArgument)
        << run.ranks[r];
    EXPECT_THAT(
        std::string(run.ranks[r].message()),
        ::testing::AllOf(::testing::HasSubstr("rank 0: f64[2, 3, 2, 2]"),
                         ::testing::HasSubstr("rank 1: f64[2, 4, 2, 2]")));
  }
}

TEST(SyncBatchNormTest, ConvertReplacesNestedBatchNormsKeepingState) {
  sim::RunResult run =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        (void)rank;
        nn::Sequential model;
        auto inner = std::make_unique<nn::Sequential>();
        TANDEM_RETURN_IF_ERROR(
            inner->Append(nn::BatchNorm2d::Create(kC, Opts())));
        nn::Sequential* inner_raw = inner.get();
        TANDEM_RETURN_IF_ERROR(model.Append(std::move(inner)));
        TANDEM_RETURN_IF_ERROR(
            model.Append(nn::BatchNorm2d::Create(kC, Opts())));
        const nn::StateDict before = model.StateDict();
        const std::vector<Tensor> params = model.Parameters();
        TANDEM_ASSIGN_OR_RETURN(int64_t n, ConvertSyncBatchNorm(model, comm));
        EXPECT_EQ(n, 2);
        EXPECT_EQ(model.at(1)->type_name(), "SyncBatchNorm");
        EXPECT_EQ(inner_raw->at(0)->type_name(), "SyncBatchNorm");
        const nn::StateDict after = model.StateDict();
        EXPECT_EQ(after.size(), before.size());
        for (size_t i = 0; i < after.size() && i < before.size(); ++i) {
          EXPECT_EQ(after[i].name, before[i].name);
        }
        // The same tensors (an optimizer built before still sees them).
        const std::vector<Tensor> now = model.Parameters();
        EXPECT_EQ(now.size(), params.size());
        for (size_t i = 0; i < now.size() && i < params.size(); ++i) {
          EXPECT_EQ(now[i].impl(), params[i].impl()) << i;
        }
        // The model's Forward runs the synchronised layers (a collective).
        TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                Tensor::Ones({2, kC, 2, 2}, DType::kF64));
        TANDEM_RETURN_IF_ERROR(model.Forward(x).status());
        TANDEM_ASSIGN_OR_RETURN(double tracked,
                                model.at(1)->NamedBuffers()[2].tensor.Item());
        EXPECT_EQ(tracked, 1);
        return absl::OkStatus();
      });
  EXPECT_TRUE(run.ok()) << run.status();
}

// ResNet-18 (f64) converted at 2 ranks with one 16x16 image each gives the
// logits the unconverted model gives both images at one rank. Through
// twenty normalisations (the last ones over two values per channel, where
// the variance cancels heavily) rounding grows: the largest difference
// seen was 7.9e-10 on logits up to ~1; 1e-8 leaves a 10x margin, and a
// layer left unconverted fails outright (one value per channel) or
// differs by O(1).
TEST(SyncBatchNormTest, ConvertedResnet18AtTwoRanksEqualsOneRank) {
  const int64_t per = 3 * 16 * 16;
  const std::vector<double> images = Draw(2 * per, 7);
  Generator gen0(0);
  auto ref = nn::Resnet18(5, gen0, {.dtype = DType::kF64});
  ASSERT_TRUE(ref.ok()) << ref.status();
  auto both = Tensor::FromVector(images, {2, 3, 16, 16});
  ASSERT_TRUE(both.ok());
  auto want = (*ref)->Forward(*both);
  ASSERT_TRUE(want.ok()) << want.status();
  auto want_v = want->ToVector<double>();
  ASSERT_TRUE(want_v.ok());
  const nn::StateDict ref_state = (*ref)->StateDict();

  sim::RunResult run =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(0);
        TANDEM_ASSIGN_OR_RETURN(auto model,
                                nn::Resnet18(5, gen, {.dtype = DType::kF64}));
        TANDEM_ASSIGN_OR_RETURN(int64_t n, ConvertSyncBatchNorm(*model, comm));
        EXPECT_EQ(n, 20);  // stem, 2 per block x 8, 3 downsamples
        const nn::StateDict state = model->StateDict();
        EXPECT_EQ(state.size(), ref_state.size());
        for (size_t i = 0; i < state.size() && i < ref_state.size(); ++i) {
          EXPECT_EQ(state[i].name, ref_state[i].name);
        }
        TANDEM_ASSIGN_OR_RETURN(
            Tensor mine,
            Tensor::FromVector(
                std::vector<double>(images.begin() + rank * per,
                                    images.begin() + (rank + 1) * per),
                {1, 3, 16, 16}));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, model->Forward(mine));
        TANDEM_ASSIGN_OR_RETURN(auto v, y.ToVector<double>());
        EXPECT_EQ(v.size(), 5u);
        for (size_t i = 0; i < v.size(); ++i) {
          EXPECT_NEAR(v[i], (*want_v)[rank * 5 + i], 1e-8)
              << "rank " << rank << " logit " << i;
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(run.ok()) << run.status();
}

// A module that keeps its own pointer to its BatchNorm2d, like a ResNet
// block, and so does not support ReplaceChild.
class Holder : public nn::Module {
 public:
  absl::Status Init() {
    TANDEM_ASSIGN_OR_RETURN(
        bn_, RegisterModule("bn", nn::BatchNorm2d::Create(kC, Opts())));
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    return bn_->Forward(x);
  }
  std::string_view type_name() const override { return "Holder"; }

 private:
  nn::BatchNorm2d* bn_ = nullptr;
};

TEST(SyncBatchNormTest, ConvertRefusesTheRootAndUnreplaceableParents) {
  sim::RunResult run =
      sim::Run(1, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto bn, nn::BatchNorm2d::Create(kC, Opts()));
        EXPECT_EQ(ConvertSyncBatchNorm(*bn, comm).status().code(),
                  absl::StatusCode::kInvalidArgument);
        // Sequential(BatchNorm2d, Holder(bn)): nothing is converted, not
        // even the Sequential's own BatchNorm2d.
        nn::Sequential model;
        TANDEM_RETURN_IF_ERROR(
            model.Append(nn::BatchNorm2d::Create(kC, Opts())));
        auto holder = std::make_unique<Holder>();
        TANDEM_RETURN_IF_ERROR(holder->Init());
        TANDEM_RETURN_IF_ERROR(model.Append(std::move(holder)));
        absl::StatusOr<int64_t> n = ConvertSyncBatchNorm(model, comm);
        EXPECT_EQ(n.status().code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(std::string(n.status().message()),
                    ::testing::HasSubstr("\"1.bn\" sits in a Holder"));
        EXPECT_EQ(model.at(0)->type_name(), "BatchNorm2d");
        return absl::OkStatus();
      });
  EXPECT_TRUE(run.ok()) << run.status();
}

}  // namespace
}  // namespace tandem::train
