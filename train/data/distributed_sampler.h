// DistributedSampler: which dataset indices each rank trains on, bit for bit
// the same as torch.utils.data.distributed.DistributedSampler.
//
// Every rank builds the same global order (a seeded shuffle, or 0..n-1), pads
// it by repeating its own prefix so it divides evenly (or truncates it with
// drop_last), then takes every R-th position starting at its rank. The shards
// are disjoint (up to the padding) and together cover the dataset.
//
//   absl::StatusOr<DistributedSampler> sampler = DistributedSampler::Create(
//       /*dataset_size=*/5, {.num_replicas = 2, .rank = 1});
//   for (int64_t epoch = 0; epoch < 3; ++epoch) {
//     sampler->SetEpoch(epoch);  // forgetting this repeats epoch 0's order
//     for (int64_t index : sampler->Indices()) { ... }
//   }
//
// The shuffle uses a fresh Generator seeded with seed + epoch, exactly as
// PyTorch does, so a tandem run and a PyTorch run see the same samples.
// Thread-safety: a value type; const methods may be called concurrently.
#ifndef TANDEM_TRAIN_DATA_DISTRIBUTED_SAMPLER_H_
#define TANDEM_TRAIN_DATA_DISTRIBUTED_SAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::train {

struct DistributedSamplerOptions {
  int64_t num_replicas = 1;  // R >= 1: the world size
  int64_t rank = 0;          // 0 <= rank < R
  bool shuffle = true;
  uint64_t seed = 0;       // must be the same on every rank
  bool drop_last = false;  // truncate instead of padding
};

class DistributedSampler {
 public:
  // Fails (InvalidArgument, naming the value) when dataset_size < 0,
  // num_replicas < 1, rank is outside [0, num_replicas), or the indices of
  // dataset_size samples would not fit in this machine's physical memory (the
  // message gives both figures). Any num_replicas up to INT64_MAX is fine:
  // Indices() never materialises the padded global order.
  static absl::StatusOr<DistributedSampler> Create(
      int64_t dataset_size, const DistributedSamplerOptions& options);

  // Selects the shuffle of the next Indices() call (seed + epoch).
  void SetEpoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch, in training order; always
  // num_samples() long.
  std::vector<int64_t> Indices() const;

  // Samples per rank: ceil(n / R), or with drop_last and n % R != 0,
  // ceil((n - R) / R) (so 0 when n < R).
  int64_t num_samples() const { return num_samples_; }
  // num_samples() * R: the length of the padded (or truncated) global order.
  int64_t total_size() const { return num_samples_ * options_.num_replicas; }
  int64_t dataset_size() const { return dataset_size_; }
  const DistributedSamplerOptions& options() const { return options_; }

 private:
  DistributedSampler(int64_t dataset_size,
                     const DistributedSamplerOptions& options,
                     int64_t num_samples)
      : dataset_size_(dataset_size),
        options_(options),
        num_samples_(num_samples) {}

  int64_t dataset_size_;
  DistributedSamplerOptions options_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DISTRIBUTED_SAMPLER_H_
