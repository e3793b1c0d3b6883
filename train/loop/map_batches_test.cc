// MapBatches and HeldOutTop1 on simulated ranks:
//   - MapBatches: each rank's shard of the given indices (not of 0..n-1),
//     drop_last batches, the same augmentations when an epoch is prepared
//     again (a resume), another order the next epoch, features in the
//     requested dtype;
//   - HeldOutTop1: every rank scores its strided slice of the indices, the
//     counts summed over the ranks, through DDP (ShardMode::kNone) or the
//     strategy's forward (kLocal), the model back in training mode.
#include "train/loop/map_batches.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/loop/eval_testing.h"

namespace tandem::train {
namespace {

using ::testing::UnorderedElementsAreArray;

// Sample i: features {i, a uniform draw from the sample's generator}, label
// i % 2.
class Numbered final : public MapDataset {
 public:
  explicit Numbered(int64_t size) : size_(size) {}
  int64_t size() const override { return size_; }
  absl::StatusOr<Sample> Get(int64_t index, Generator& gen) const override {
    float draw = 0;
    gen.Uniform(&draw, 1, 0.f, 1.f);
    TANDEM_ASSIGN_OR_RETURN(
        Tensor x,
        Tensor::FromVector<float>({static_cast<float>(index), draw}, {2}));
    return Sample{x, index % 2};
  }

 private:
  int64_t size_;
};

// SevenRows (eval_testing.h) as a MapDataset.
class Rows final : public MapDataset {
 public:
  explicit Rows(TensorDataset rows) : rows_(std::move(rows)) {}
  int64_t size() const override { return rows_.size(); }
  absl::StatusOr<Sample> Get(int64_t index, Generator&) const override {
    const float* x = rows_.features.data<float>() + 2 * index;
    TANDEM_ASSIGN_OR_RETURN(Tensor row,
                            Tensor::FromVector<float>({x[0], x[1]}, {2}));
    return Sample{row, rows_.labels.data<int64_t>()[index]};
  }

 private:
  TensorDataset rows_;
};

// Every batch of `epoch` as (sample, draw) pairs, features as doubles.
absl::StatusOr<std::vector<std::pair<double, double>>> Epoch(
    MapBatches& batches, int64_t epoch) {
  TANDEM_ASSIGN_OR_RETURN(const int64_t steps, batches.BeginEpoch(epoch));
  std::vector<std::pair<double, double>> out;
  for (int64_t s = 0; s < steps; ++s) {
    TANDEM_ASSIGN_OR_RETURN(Batch b, batches.GetBatch(s));
    EXPECT_EQ(b.features.dtype(), DType::kF64);
    const double* x = b.features.data<double>();
    for (int64_t i = 0; i < b.labels.numel(); ++i) {
      out.emplace_back(x[2 * i], x[2 * i + 1]);
    }
  }
  return out;
}

TEST(MapBatchesTest, ShardsTheIndicesAndRepeatsAnEpochsAugmentations) {
  const std::vector<int64_t> indices = {9, 3, 7, 1, 5, 8, 2, 6};
  std::vector<std::vector<double>> seen(2);
  sim::RunResult r =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        auto data = std::make_shared<Numbered>(10);
        TANDEM_ASSIGN_OR_RETURN(
            MapBatches batches,
            MapBatches::Create(
                data, indices, comm,
                {.batch_size = 3, .seed = 4, .dtype = DType::kF64}));
        EXPECT_EQ(batches.GetBatch(0).status().code(),
                  absl::StatusCode::kFailedPrecondition);
        TANDEM_ASSIGN_OR_RETURN(auto first, Epoch(batches, 0));
        EXPECT_EQ(first.size(), 3u);  // 4 of the shard, drop_last
        TANDEM_ASSIGN_OR_RETURN(auto again, Epoch(batches, 0));
        EXPECT_EQ(first, again);  // the same samples and draws
        TANDEM_ASSIGN_OR_RETURN(auto next, Epoch(batches, 1));
        EXPECT_NE(first, next);
        TANDEM_ASSIGN_OR_RETURN(
            MapBatches all,
            MapBatches::Create(
                data, indices, comm,
                {.batch_size = 4, .seed = 4, .dtype = DType::kF64}));
        TANDEM_ASSIGN_OR_RETURN(auto shard, Epoch(all, 0));
        for (const auto& [sample, draw] : shard) {
          seen[rank].push_back(sample);
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.status().ok()) << r.status();
  std::vector<double> both = seen[0];
  both.insert(both.end(), seen[1].begin(), seen[1].end());
  EXPECT_THAT(both, UnorderedElementsAreArray(
                        std::vector<double>{9, 3, 7, 1, 5, 8, 2, 6}));
}

// IdentityLinear gets SevenRows' rows 0-4 right, rows 5 and 6 wrong.
TEST(MapBatchesTest, HeldOutTop1SumsEveryRanksSlice) {
  const std::vector<std::pair<ShardMode, int>> runs = {
      {ShardMode::kNone, 1},
      {ShardMode::kNone, 3},
      {ShardMode::kLocal, 1}};  // no DDP: Strategy::Forward
  for (const auto& [mode, world] : runs) {
    sim::RunResult r =
        sim::Run(world, [&](int, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(TensorDataset rows, SevenRows());
          auto data = std::make_shared<Rows>(rows);
          TANDEM_ASSIGN_OR_RETURN(auto model, IdentityLinear());
          TANDEM_ASSIGN_OR_RETURN(
              auto loop,
              TrainingLoop::Create(comm, *model, mode, SgdFactory(0.1),
                                   {.who = "test", .epochs = 1}));
          TANDEM_ASSIGN_OR_RETURN(
              Score all, HeldOutTop1(*loop, data, {0, 1, 2, 3, 4, 5, 6},
                                     {.batch_size = 2}));
          EXPECT_EQ(all.correct, 5);
          EXPECT_EQ(all.total, 7);
          EXPECT_TRUE(model->is_training());
          TANDEM_ASSIGN_OR_RETURN(
              Score some,
              HeldOutTop1(*loop, data, {6, 0, 5}, {.batch_size = 1}));
          EXPECT_EQ(some.correct, 1);
          EXPECT_EQ(some.total, 3);
          return absl::OkStatus();
        });
    ASSERT_TRUE(r.status().ok()) << world << ": " << r.status();
  }
}

}  // namespace
}  // namespace tandem::train
