// IndexBatches: each step takes per_step consecutive indices of the
// sampler's order of the epoch, the rest of the shard dropped; the
// argument and order errors.
#include "train/loop/index_batches.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

// The indices of a step as its features (one row each).
absl::StatusOr<Batch> AsBatch(const std::vector<int64_t>& indices) {
  std::vector<float> v(indices.begin(), indices.end());
  auto features = Tensor::FromVector(v);
  if (!features.ok()) return features.status();
  return Batch{.features = *features, .labels = *features};
}

std::vector<int64_t> Indices(const Batch& b) {
  std::vector<float> v = *b.features.ToVector<float>();
  return std::vector<int64_t>(v.begin(), v.end());
}

DistributedSampler Sampler(int rank) {
  return *DistributedSampler::Create(23, {.num_replicas = 2,
                                          .rank = rank,
                                          .shuffle = true,
                                          .seed = 5,
                                          .drop_last = true});
}

TEST(IndexBatchesTest, EachStepTakesTheNextIndicesOfTheEpochsOrder) {
  for (int rank : {0, 1}) {
    IndexBatches batches = *IndexBatches::Create(Sampler(rank), 3, AsBatch);
    EXPECT_EQ(batches.steps_per_epoch(), 3);  // 11 per rank, 2 dropped
    for (int64_t epoch : {0, 1}) {
      DistributedSampler reference = Sampler(rank);
      reference.SetEpoch(epoch);
      const std::vector<int64_t> order = reference.Indices();
      ASSERT_EQ(*batches.BeginEpoch(epoch), 3);
      for (int64_t s = 0; s < 3; ++s) {
        EXPECT_EQ(Indices(*batches.GetBatch(s)),
                  std::vector<int64_t>(order.begin() + 3 * s,
                                       order.begin() + 3 * s + 3));
      }
    }
  }
  // Epochs differ (SetEpoch reshuffles).
  IndexBatches batches = *IndexBatches::Create(Sampler(0), 11, AsBatch);
  ASSERT_TRUE(batches.BeginEpoch(0).ok());
  const std::vector<int64_t> first = Indices(*batches.GetBatch(0));
  ASSERT_TRUE(batches.BeginEpoch(1).ok());
  EXPECT_NE(Indices(*batches.GetBatch(0)), first);
}

TEST(IndexBatchesTest, RefusesBadArgumentsAndSteps) {
  EXPECT_EQ(IndexBatches::Create(Sampler(0), 0, AsBatch).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IndexBatches::Create(Sampler(0), 2, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  IndexBatches batches = *IndexBatches::Create(Sampler(0), 4, AsBatch);
  EXPECT_EQ(batches.GetBatch(0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(*batches.BeginEpoch(0), 2);
  EXPECT_EQ(batches.GetBatch(2).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(batches.GetBatch(-1).status().code(),
            absl::StatusCode::kOutOfRange);
  // A shard shorter than a step: an epoch of no step.
  IndexBatches none = *IndexBatches::Create(Sampler(0), 12, AsBatch);
  EXPECT_EQ(*none.BeginEpoch(0), 0);
}

}  // namespace
}  // namespace tandem::train
