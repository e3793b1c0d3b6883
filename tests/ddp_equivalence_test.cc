// DDP equivalence and determinism, across tensor, nn, optim, train and sim.
//
// Equivalence: N ranks, each training on its own b rows of every global
// batch, end with the same parameters as one process training on all N·b
// rows (no DDP), within 1e-5 relative — for N = 1, 2, 3, 4, 8, with bucket
// caps that split the parameters unevenly (and the default single bucket),
// with and without gradient accumulation through NoSync().
// Determinism: two runs give bitwise identical parameters, and all ranks of
// one run hold bitwise identical parameters.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem {
namespace {

constexpr int64_t kIn = 5;
constexpr int64_t kClasses = 3;
constexpr int kSteps = 3;
constexpr int64_t kPerRankBatch = 2;
constexpr double kLr = 0.1;

// Parameters, in bytes: 0.weight 320, 0.bias 64, 2.weight 768, 2.bias 48,
// 4.weight 144, 4.bias 12.
absl::StatusOr<std::unique_ptr<nn::Sequential>> Model() {
  Generator gen(42);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(kIn, 16, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(16, 12, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(12, kClasses, gen)));
  return model;
}

absl::StatusOr<optim::Sgd> Optimizer(nn::Module& model) {
  optim::SgdOptions options;
  options.momentum = 0.9;
  return optim::Sgd::Create(model.Parameters(), kLr, options);
}

// The global batch of (step, micro-batch): `rows` feature rows and labels.
struct GlobalBatch {
  Tensor features;  // [rows, kIn]
  Tensor labels;    // [rows]
};

absl::StatusOr<GlobalBatch> MakeBatch(int step, int micro, int64_t rows) {
  Generator gen(1000 * step + micro + 1);
  std::vector<float> x(rows * kIn);
  gen.Uniform(x.data(), rows * kIn, -2.f, 2.f);
  std::vector<int64_t> y(rows);
  for (int64_t& label : y) label = gen.Random() % kClasses;
  GlobalBatch batch;
  TANDEM_ASSIGN_OR_RETURN(batch.features, Tensor::FromVector(x, {rows, kIn}));
  TANDEM_ASSIGN_OR_RETURN(batch.labels, Tensor::FromVector(y));
  return batch;
}

using Params = std::vector<std::vector<float>>;

absl::StatusOr<Params> Snapshot(const nn::Module& model) {
  Params out;
  for (const Tensor& p : model.Parameters()) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, p.ToVector<float>());
    out.push_back(std::move(v));
  }
  return out;
}

// One process, all N·b rows of every batch, no DDP.
absl::StatusOr<Params> TrainReference(int world, int accumulation) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Model());
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd, Optimizer(*model));
  for (int step = 0; step < kSteps; ++step) {
    sgd.ZeroGrad();
    for (int micro = 0; micro < accumulation; ++micro) {
      TANDEM_ASSIGN_OR_RETURN(GlobalBatch batch,
                              MakeBatch(step, micro, world * kPerRankBatch));
      TANDEM_ASSIGN_OR_RETURN(Tensor logits, model->Forward(batch.features));
      TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, batch.labels));
      TANDEM_RETURN_IF_ERROR(loss.Backward());
    }
    TANDEM_RETURN_IF_ERROR(sgd.Step());
  }
  return Snapshot(*model);
}

// N ranks on the simulated cluster, rank r on rows [r·b, (r+1)·b). Returns
// every rank's final parameters.
absl::StatusOr<std::vector<Params>> TrainDdp(int world, int accumulation,
                                             const train::DdpOptions& options) {
  std::vector<Params> result(world);
  sim::RunResult run =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, Model());
        TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd, Optimizer(*model));
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp,
            train::DistributedDataParallel::Create(*model, comm, options));
        auto micro_step = [&](int step, int micro) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(
              GlobalBatch batch, MakeBatch(step, micro, world * kPerRankBatch));
          TANDEM_ASSIGN_OR_RETURN(
              Tensor x, batch.features.View(rank * kPerRankBatch * kIn,
                                            {kPerRankBatch, kIn}));
          TANDEM_ASSIGN_OR_RETURN(
              Tensor y,
              batch.labels.View(rank * kPerRankBatch, {kPerRankBatch}));
          TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, y));
          return ddp->Backward(loss);
        };
        for (int step = 0; step < kSteps; ++step) {
          sgd.ZeroGrad();
          {
            auto no_sync = ddp->NoSync();
            for (int micro = 0; micro + 1 < accumulation; ++micro) {
              TANDEM_RETURN_IF_ERROR(micro_step(step, micro));
            }
          }
          TANDEM_RETURN_IF_ERROR(micro_step(step, accumulation - 1));
          TANDEM_RETURN_IF_ERROR(sgd.Step());
        }
        TANDEM_ASSIGN_OR_RETURN(result[rank], Snapshot(*model));
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(run.status());
  return result;
}

enum class Buckets { kDefault, kUneven, kOnePerParameter };

train::DdpOptions OptionsFor(Buckets buckets) {
  train::DdpOptions options;
  switch (buckets) {
    case Buckets::kDefault:
      break;
    case Buckets::kUneven:
      // 4.bias + 4.weight (156 B) | 2.bias | 2.weight (oversize) | 0.bias |
      // 0.weight (oversize).
      options.first_bucket_cap_bytes = 200;
      options.bucket_cap_bytes = 300;
      break;
    case Buckets::kOnePerParameter:
      options.first_bucket_cap_bytes = 1;
      options.bucket_cap_bytes = 1;
      break;
  }
  return options;
}

std::string BucketsName(Buckets b) {
  switch (b) {
    case Buckets::kDefault:
      return "DefaultBuckets";
    case Buckets::kUneven:
      return "UnevenBuckets";
    case Buckets::kOnePerParameter:
      return "OneBucketPerParameter";
  }
  return "?";
}

void PrintTo(Buckets b, std::ostream* os) { *os << BucketsName(b); }

using Case = std::tuple<int, Buckets, int>;  // world, buckets, accumulation

class DdpEquivalenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(DdpEquivalenceTest, MatchesOneRankOnTheConcatenatedBatch) {
  const auto [world, buckets, accumulation] = GetParam();
  const train::DdpOptions options = OptionsFor(buckets);

  absl::StatusOr<Params> reference = TrainReference(world, accumulation);
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<std::vector<Params>> ranks =
      TrainDdp(world, accumulation, options);
  ASSERT_TRUE(ranks.ok()) << ranks.status();

  // The run moved the parameters (so the comparison means something).
  absl::StatusOr<std::unique_ptr<nn::Sequential>> initial = Model();
  ASSERT_TRUE(initial.ok());
  absl::StatusOr<Params> start = Snapshot(**initial);
  ASSERT_TRUE(start.ok());
  EXPECT_NE(*start, *reference);

  for (int r = 0; r < world; ++r) {
    const Params& got = (*ranks)[r];
    ASSERT_EQ(got.size(), reference->size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::vector<float>& want = (*reference)[i];
      ASSERT_EQ(got[i].size(), want.size());
      // Relative to the tensor's scale: max |got - want| <= 1e-5 max |want|.
      float scale = 0.f, worst = 0.f;
      for (size_t k = 0; k < want.size(); ++k) {
        scale = std::max(scale, std::fabs(want[k]));
        worst = std::max(worst, std::fabs(got[i][k] - want[k]));
      }
      EXPECT_LE(worst, 1e-5f * scale)
          << "rank " << r << ", parameter " << i << ": max difference " << worst
          << " at scale " << scale;
    }
    // Every rank ends bitwise identical to rank 0.
    EXPECT_EQ(got, (*ranks)[0]) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllWorldSizes, DdpEquivalenceTest,
    ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                       ::testing::Values(Buckets::kDefault, Buckets::kUneven,
                                         Buckets::kOnePerParameter),
                       ::testing::Values(1, 3)),
    [](const ::testing::TestParamInfo<Case>& info) {
      return absl::StrCat(
          "World", std::get<0>(info.param), "_",
          BucketsName(std::get<1>(info.param)), "_",
          std::get<2>(info.param) == 1
              ? std::string("NoAccumulation")
              : absl::StrCat("NoSyncAccumulation", std::get<2>(info.param)));
    });

TEST(DdpDeterminismTest, TwoRunsAreBitwiseIdentical) {
  for (int world : {3, 4}) {
    const train::DdpOptions options = OptionsFor(Buckets::kUneven);
    absl::StatusOr<std::vector<Params>> first = TrainDdp(world, 2, options);
    absl::StatusOr<std::vector<Params>> second = TrainDdp(world, 2, options);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(*first, *second) << "world " << world;
  }
}

}  // namespace
}  // namespace tandem
