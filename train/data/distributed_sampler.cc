#include "train/data/distributed_sampler.h"

#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/generator.h"

namespace tandem::train {
namespace {

// ceil(a / b) for b > 0 and any sign of a, like Python's math.ceil(a / b).
int64_t CeilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

}  // namespace

absl::StatusOr<DistributedSampler> DistributedSampler::Create(
    int64_t dataset_size, const DistributedSamplerOptions& options) {
  if (dataset_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: dataset size must be >= 0, got ", dataset_size));
  }
  if (options.num_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: num_replicas (the world size) must be >= 1, got ",
        options.num_replicas));
  }
  if (options.rank < 0 || options.rank >= options.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedSampler: rank must be in [0, ", options.num_replicas - 1,
        "] for num_replicas=", options.num_replicas, ", got ", options.rank));
  }
  const int64_t r = options.num_replicas;
  const int64_t num_samples = (options.drop_last && dataset_size % r != 0)
                                  ? CeilDiv(dataset_size - r, r)
                                  : CeilDiv(dataset_size, r);
  return DistributedSampler(dataset_size, options, num_samples);
}

std::vector<int64_t> DistributedSampler::Indices() const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    // A fresh generator per epoch, as PyTorch's __iter__ does.
    Generator generator(options_.seed + static_cast<uint64_t>(epoch_));
    order = generator.Randperm(dataset_size_);
  } else {
    order.resize(dataset_size_);
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t total = total_size();
  const int64_t n = static_cast<int64_t>(order.size());
  if (total > n) {
    // Pad with the order's own prefix, cycling when the padding is longer
    // than the order (n >= 1 here: total > n >= 0 needs n > 0 for any
    // padding, since total == 0 when n == 0).
    order.reserve(total);
    for (int64_t i = n; i < total; ++i) order.push_back(order[(i - n) % n]);
  } else {
    order.resize(total);
  }
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = options_.rank; i < total; i += options_.num_replicas) {
    mine.push_back(order[i]);
  }
  return mine;
}

}  // namespace tandem::train
