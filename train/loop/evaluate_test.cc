// The examples' scoring helpers on simulated ranks, with a model whose
// predictions are known: Linear(2, 2) with the identity weight and no bias
// predicts the larger feature's index.
//   - LoaderAccuracy: f32 correct / count over a loader's batches; an empty
//     loader is the caller's error;
//   - StridedScore: every rank scores rows rank, rank + world, ... and the
//     counts are summed over the ranks (a rank with no rows included).
#include "train/loop/evaluate.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/linear.h"

namespace tandem::train {
namespace {

// 7 rows; rows 0-4 labelled as the model predicts, rows 5 and 6 not.
absl::StatusOr<TensorDataset> Rows() {
  TANDEM_ASSIGN_OR_RETURN(
      Tensor x, Tensor::FromVector<float>(
                    {1, 0, 0, 1, 2, 1, 1, 3, 5, 4, 0, 1, 1, 0}, {7, 2}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::FromVector<int64_t>({0, 1, 0, 1, 0, 0, 1}));
  return TensorDataset::Create(x, y);
}

absl::StatusOr<std::unique_ptr<nn::Linear>> Identity() {
  Generator gen(1);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Linear> model,
                          nn::Linear::Create(2, 2, gen, {.bias = false}));
  Tensor weight = model->weight();
  float* w = weight.data<float>();
  w[0] = 1, w[1] = 0, w[2] = 0, w[3] = 1;
  return model;
}

TEST(EvaluateTest, LoaderAccuracyIsTheF32RatioAndRefusesNoRows) {
  sim::RunResult r =
      sim::Run(1, [](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Rows());
        TANDEM_ASSIGN_OR_RETURN(auto model, Identity());
        TANDEM_ASSIGN_OR_RETURN(
            auto strategy,
            Strategy::Create(ShardMode::kLocal, *model, comm, SgdFactory(0.1)));
        TANDEM_ASSIGN_OR_RETURN(DataLoader loader,
                                DataLoader::Sequential(data, 3, false));
        TANDEM_ASSIGN_OR_RETURN(
            float accuracy,
            LoaderAccuracy(*strategy, loader, Device::CPU(), "unused"));
        EXPECT_EQ(accuracy, 5.0f / 7.0f);
        TANDEM_ASSIGN_OR_RETURN(DataLoader none,
                                DataLoader::Sequential(data, 8, true));
        absl::StatusOr<float> empty =
            LoaderAccuracy(*strategy, none, Device::CPU(), "no rows here");
        EXPECT_EQ(empty.status(),
                  absl::FailedPreconditionError("no rows here"));
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

TEST(EvaluateTest, StridedScoreSumsEveryRanksSlice) {
  for (int world : {1, 3, 8}) {
    sim::RunResult r =
        sim::Run(world, [](int, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(TensorDataset data, Rows());
          TANDEM_ASSIGN_OR_RETURN(auto model, Identity());
          TANDEM_ASSIGN_OR_RETURN(
              auto strategy, Strategy::Create(ShardMode::kNone, *model, comm,
                                              SgdFactory(0.1)));
          TANDEM_ASSIGN_OR_RETURN(
              Score score, StridedScore(comm, *strategy, data, Device::CPU()));
          EXPECT_EQ(score.correct, 5);
          EXPECT_EQ(score.total, 7);
          return absl::OkStatus();
        });
    ASSERT_TRUE(r.status().ok()) << world << ": " << r.status();
  }
}

}  // namespace
}  // namespace tandem::train
