#include "train/data/distributed_sampler.h"

#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/memory.h"
#include "tensor/generator.h"

namespace tandem::train {
namespace {

// ceil(a / b) for b > 0 and any sign of a, like Python's math.ceil(a / b).
int64_t CeilDiv(int64_t a, int64_t b) {
  // a / b + (a % b != 0) rather than (a + b - 1) / b, which overflows for
  // b near INT64_MAX.
  return a >= 0 ? a / b + (a % b != 0) : -((-a) / b);
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
  // Indices() holds the dataset's order and this rank's share at once.
  if (absl::Status fits = CheckFitsInMemory(
          dataset_size, 2 * sizeof(int64_t),
          absl::StrCat("DistributedSampler: dataset size ", dataset_size));
      !fits.ok()) {
    return absl::InvalidArgumentError(fits.message());
  }
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
  // Position i of the padded (or truncated) global order is order[i % n]:
  // the padding repeats the order's own prefix, cycling when it is longer
  // than the order. Only this rank's positions are visited, so the memory is
  // n + num_samples whatever the world size (n >= 1 whenever num_samples_ >
  // 0, since total_size() == 0 when n == 0).
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t k = 0; k < num_samples_; ++k) {
    // rank + k * R < total_size() <= max(n, R * ceil(n / R)): no overflow
    // for any n that fits in memory.
    mine.push_back(order[(options_.rank + k * options_.num_replicas) % n]);
  }
  return mine;
}

}  // namespace tandem::train
