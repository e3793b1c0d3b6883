#include "train/loop/index_batches.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::train {

absl::StatusOr<IndexBatches> IndexBatches::Create(DistributedSampler sampler,
                                                  int64_t per_step,
                                                  MakeBatch make_batch) {
  std::vector<DistributedSampler> samplers;
  samplers.push_back(std::move(sampler));
  return Create(std::move(samplers), per_step, std::move(make_batch));
}

absl::StatusOr<IndexBatches> IndexBatches::Create(
    std::vector<DistributedSampler> samplers, int64_t per_step,
    MakeBatch make_batch) {
  if (per_step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IndexBatches: per_step is ", per_step, "; expected >= 1"));
  }
  if (!make_batch) {
    return absl::InvalidArgumentError("IndexBatches: no make_batch given");
  }
  if (samplers.empty()) {
    return absl::InvalidArgumentError("IndexBatches: no sampler given");
  }
  for (const DistributedSampler& s : samplers) {
    if (s.num_samples() != samplers[0].num_samples()) {
      return absl::InvalidArgumentError(
          absl::StrCat("IndexBatches: the replicas' samplers give ",
                       samplers[0].num_samples(), " and ", s.num_samples(),
                       " samples an epoch; they must give the same"));
    }
  }
  return IndexBatches(std::move(samplers), per_step, std::move(make_batch));
}

absl::StatusOr<int64_t> IndexBatches::BeginEpoch(int64_t epoch) {
  orders_.clear();
  for (DistributedSampler& sampler : samplers_) {
    sampler.SetEpoch(epoch);
    orders_.push_back(sampler.Indices());
  }
  begun_ = true;
  return steps_per_epoch();
}

absl::StatusOr<Batch> IndexBatches::GetBatch(int64_t step) {
  return GetReplicaBatch(step, 0);
}

absl::StatusOr<Batch> IndexBatches::GetReplicaBatch(int64_t step, int64_t v) {
  if (!begun_) {
    return absl::FailedPreconditionError(
        "IndexBatches: GetBatch before BeginEpoch");
  }
  if (step < 0 || step >= steps_per_epoch()) {
    return absl::OutOfRangeError(absl::StrCat("IndexBatches: step ", step,
                                              " of an epoch of ",
                                              steps_per_epoch(), " steps"));
  }
  if (v < 0 || v >= replicas()) {
    return absl::InvalidArgumentError(
        absl::StrCat("IndexBatches: replica ", v, " of ", replicas()));
  }
  const auto first = orders_[v].begin() + step * per_step_;
  return make_batch_(std::vector<int64_t>(first, first + per_step_));
}

}  // namespace tandem::train
