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
  if (per_step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IndexBatches: per_step is ", per_step, "; expected >= 1"));
  }
  if (!make_batch) {
    return absl::InvalidArgumentError("IndexBatches: no make_batch given");
  }
  return IndexBatches(std::move(sampler), per_step, std::move(make_batch));
}

absl::StatusOr<int64_t> IndexBatches::BeginEpoch(int64_t epoch) {
  sampler_.SetEpoch(epoch);
  order_ = sampler_.Indices();
  begun_ = true;
  return steps_per_epoch();
}

absl::StatusOr<Batch> IndexBatches::GetBatch(int64_t step) {
  if (!begun_) {
    return absl::FailedPreconditionError(
        "IndexBatches: GetBatch before BeginEpoch");
  }
  if (step < 0 || step >= steps_per_epoch()) {
    return absl::OutOfRangeError(absl::StrCat("IndexBatches: step ", step,
                                              " of an epoch of ",
                                              steps_per_epoch(), " steps"));
  }
  const auto first = order_.begin() + step * per_step_;
  return make_batch_(std::vector<int64_t>(first, first + per_step_));
}

}  // namespace tandem::train
