// SyncBatchNorm at N sim ranks with b samples each against nn::BatchNorm2d
// at one rank with the N * b samples; eval mode; ranks whose channel counts
// differ; ConvertSyncBatchNorm on a nested model.
#include "train/parallel/sync_batch_norm.h"

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
#include "tensor/nn/batch_norm.h"
#include "tensor/nn/models/resnet.h"
#include "tensor/nn/sequential.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

constexpr int64_t kPerRank = 2;  // b
constexpr int64_t kC = 3, kH = 2, kW = 3;
constexpr int kSteps = 2;

// f64 throughout. The sync path combines the ranks' (mean, biased var)
// with Chan's formula where BatchNorm2d sums all N * b * H * W values at
// once, so the two differ by rounding only (the largest difference seen,
// with the tolerance set to 0: 2.1e-14, on values up to ~40); 1e-12 leaves
// a 50x margin and still fails on any real difference (a wrong count or a
// missing all-reduce changes results by 1e-2 or more).
constexpr double kTol = 1e-12;

nn::BatchNorm2d::Options Opts() {
  return {.eps = 1e-5, .momentum = 0.1, .dtype = DType::kF64};
}

// Step s's whole batch [N * b, C, H, W] and the upstream gradient dy (the
// loss is sum(y * dy)), drawn from the seed.
std::vector<double> Draw(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> v(n);
  gen.Normal(v.data(), n, 0.5, 2.0);
  return v;
}

// Rows [first, first + rows) of a [*, C, H, W] batch as a fresh tensor.
absl::StatusOr<Tensor> Rows(const std::vector<double>& all, int64_t first,
                            int64_t rows) {
  const int64_t per = kC * kH * kW;
  std::vector<double> part(all.begin() + first * per,
                           all.begin() + (first + rows) * per);
  return Tensor::FromVector(part, {rows, kC, kH, kW});
}

struct Result {
  std::vector<std::vector<double>> y, dx;  // per step
  std::vector<double> dweight, dbias;      // last step
  std::vector<double> running_mean, running_var;
  double batches = 0;
};

absl::Status SetAffine(nn::Module& bn) {
  for (const nn::NamedTensor& p : bn.NamedParameters()) {
    const double base = p.name == "weight" ? 1.5 : -0.25;
    TANDEM_RETURN_IF_ERROR(p.tensor.CopyFrom(*Tensor::FromVector(
        std::vector<double>{base, base + 0.5, base - 0.75})));
  }
  return absl::OkStatus();
}

// kSteps training steps of `bn` on rows [first, first + rows) of each
// step's batch of `total` rows.
absl::StatusOr<Result> Train(nn::Module& bn, int64_t first, int64_t rows,
                             int64_t total) {
  Result out;
  TANDEM_RETURN_IF_ERROR(SetAffine(bn));
  for (int s = 0; s < kSteps; ++s) {
    const int64_t n = total * kC * kH * kW;
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Rows(Draw(n, 10 + s), first, rows));
    TANDEM_ASSIGN_OR_RETURN(Tensor dy, Rows(Draw(n, 20 + s), first, rows));
    TANDEM_RETURN_IF_ERROR(x.set_requires_grad(true));
    bn.ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(Tensor y, bn.Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor prod, Mul(y, dy));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(prod));
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_ASSIGN_OR_RETURN(auto yv, y.ToVector<double>());
    TANDEM_ASSIGN_OR_RETURN(auto dxv, x.grad().ToVector<double>());
    out.y.push_back(std::move(yv));
    out.dx.push_back(std::move(dxv));
  }
  for (const nn::NamedTensor& p : bn.NamedParameters()) {
    TANDEM_ASSIGN_OR_RETURN(auto g, p.tensor.grad().ToVector<double>());
    (p.name == "weight" ? out.dweight : out.dbias) = g;
  }
  for (const nn::NamedTensor& b : bn.NamedBuffers()) {
    if (b.name == "num_batches_tracked") {
      TANDEM_ASSIGN_OR_RETURN(out.batches, b.tensor.Item());
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(auto v, b.tensor.ToVector<double>());
    (b.name == "running_mean" ? out.running_mean : out.running_var) = v;
  }
  return out;
}

void ExpectNear(const std::vector<double>& got, const double* want, size_t n,
                const std::string& what) {
  ASSERT_EQ(got.size(), n) << what;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_NEAR(got[i], want[i], kTol) << what << " [" << i << "]";
  }
}

class SyncBatchNormWorld : public ::testing::TestWithParam<int> {};

TEST_P(SyncBatchNormWorld, EqualsBatchNormOverTheGlobalBatch) {
  const int world = GetParam();
  const int64_t total = world * kPerRank;
  auto ref_bn = nn::BatchNorm2d::Create(kC, Opts());
  ASSERT_TRUE(ref_bn.ok());
  absl::StatusOr<Result> ref = Train(**ref_bn, 0, total, total);
  ASSERT_TRUE(ref.ok()) << ref.status();

  std::vector<Result> got(world);
  sim::RunResult run =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto bn,
                                SyncBatchNorm::Create(kC, Opts(), comm));
        TANDEM_ASSIGN_OR_RETURN(got[rank],
                                Train(*bn, rank * kPerRank, kPerRank, total));
        return absl::OkStatus();
      });
  ASSERT_TRUE(run.ok()) << run.status();

  const int64_t slice = kPerRank * kC * kH * kW;
  std::vector<double> dweight(kC, 0.0), dbias(kC, 0.0);
  for (int r = 0; r < world; ++r) {
    const std::string at = absl::StrCat("world ", world, " rank ", r);
    for (int s = 0; s < kSteps; ++s) {
      // Each rank's output and input gradient are its slice of the whole.
      ExpectNear(got[r].y[s], ref->y[s].data() + r * slice, slice,
                 absl::StrCat(at, " step ", s, " y"));
      ExpectNear(got[r].dx[s], ref->dx[s].data() + r * slice, slice,
                 absl::StrCat(at, " step ", s, " dx"));
    }
    // Every rank ends with the global running statistics.
    ExpectNear(got[r].running_mean, ref->running_mean.data(), kC,
               at + " running_mean");
    ExpectNear(got[r].running_var, ref->running_var.data(), kC,
               at + " running_var");
    EXPECT_EQ(got[r].batches, kSteps) << at;
    for (int64_t c = 0; c < kC; ++c) {
      dweight[c] += got[r].dweight[c];
      dbias[c] += got[r].dbias[c];
    }
    // The parameters' gradients are local (PyTorch's too): a rank's alone
    // is not the whole batch's.
    EXPECT_GT(std::abs(got[r].dbias[0] - ref->dbias[0]), 1e-3) << at;
  }
  // The SUM over ranks of the local weight / bias gradients equals the
  // one-rank gradient of the same loss (sum over the whole batch); DDP's
  // all-reduce with averaging would give that sum / N, matching a loss
  // that is itself averaged over ranks.
  ExpectNear(dweight, ref->dweight.data(), kC, "sum of dweight");
  ExpectNear(dbias, ref->dbias.data(), kC, "sum of dbias");
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
