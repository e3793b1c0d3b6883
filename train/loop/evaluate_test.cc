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
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "train/loop/eval_testing.h"

namespace tandem::train {
namespace {

TEST(EvaluateTest, LoaderAccuracyIsTheF32RatioAndRefusesNoRows) {
  sim::RunResult r =
      sim::Run(1, [](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(TensorDataset data, SevenRows());
        TANDEM_ASSIGN_OR_RETURN(auto model, IdentityLinear());
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
          TANDEM_ASSIGN_OR_RETURN(TensorDataset data, SevenRows());
          TANDEM_ASSIGN_OR_RETURN(auto model, IdentityLinear());
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

// Items 0..6 with loss i: the mean is 3 at every world size; each rank
// scores the same number of times, its own items in order, then item 0 again
// (not counted) where it runs out.
TEST(EvaluateTest, HeldOutMeanLossSplitsTheItemsAndKeepsForwardsMatched) {
  for (int world : {1, 2, 3, 8}) {
    std::vector<std::vector<int64_t>> seen(world);
    sim::RunResult r = sim::Run(
        world, [&seen](int rank, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(
              double mean,
              HeldOutMeanLoss(comm, Device::CPU(), 7,
                              [&](int64_t i) -> absl::StatusOr<double> {
                                seen[rank].push_back(i);
                                EXPECT_FALSE(IsGradEnabled());
                                return static_cast<double>(i);
                              }));
          EXPECT_EQ(mean, 3.0);
          return absl::OkStatus();
        });
    ASSERT_TRUE(r.status().ok()) << world << ": " << r.status();
    const size_t rounds = static_cast<size_t>((7 + world - 1) / world);
    for (int rank = 0; rank < world; ++rank) {
      ASSERT_EQ(seen[rank].size(), rounds) << world << " " << rank;
      for (size_t k = 0; k < rounds; ++k) {
        const int64_t item = rank + static_cast<int64_t>(k) * world;
        EXPECT_EQ(seen[rank][k], item < 7 ? item : 0);
      }
    }
  }
}

TEST(EvaluateTest, HeldOutMeanLossRefusesNoItemsAndPassesErrorsOn) {
  sim::RunResult r =
      sim::Run(2, [](int, comm::Communicator& comm) -> absl::Status {
        absl::StatusOr<double> none = HeldOutMeanLoss(
            comm, Device::CPU(), 0, [](int64_t) { return 1.0; });
        EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(none.status().message(),
                    ::testing::HasSubstr("0 held-out items"));
        absl::StatusOr<double> bad = HeldOutMeanLoss(
            comm, Device::CPU(), 4, [](int64_t) -> absl::StatusOr<double> {
              return absl::DataLossError("block unreadable");
            });
        EXPECT_EQ(bad.status().message(), "block unreadable");
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.status().ok()) << r.status();
}

}  // namespace
}  // namespace tandem::train
