// DataLoader: batches of a TensorDataset in a given order, like
// torch.utils.data.DataLoader(dataset, batch_size, sampler=..., drop_last=...)
// with the sampler's indices for the epoch.
//
//   sampler.SetEpoch(epoch);
//   TANDEM_ASSIGN_OR_RETURN(DataLoader loader, DataLoader::Create(
//       data, sampler.Indices(), /*batch_size=*/2, /*drop_last=*/true));
//   for (int64_t b = 0; b < loader.num_batches(); ++b) {
//     TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
//     ... batch.features [<=2, ...], batch.labels [<=2] int64 ...
//   }
//
// Batch b holds samples indices[b * batch_size, (b + 1) * batch_size), in
// that order (docs/pytorch_compat.md); the last batch is shorter unless
// drop_last drops it. GetBatch copies the rows into fresh tensors (the dataset
// is never aliased by a batch, so training cannot modify it). Thread-safety:
// const methods may run concurrently.
#ifndef TANDEM_TRAIN_DATA_DATA_LOADER_H_
#define TANDEM_TRAIN_DATA_DATA_LOADER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/tensor.h"
#include "train/data/dataset.h"

namespace tandem::train {

struct Batch {
  Tensor features;  // [b, ...] same dtype as the dataset's features
  Tensor labels;    // [b] int64
};

class DataLoader {
 public:
  // `indices`: this epoch's order (e.g. DistributedSampler::Indices(), or
  // 0..n-1); each must lie in [0, data.size()). batch_size >= 1. The error
  // names the offending position and value.
  static absl::StatusOr<DataLoader> Create(const TensorDataset& data,
                                           std::vector<int64_t> indices,
                                           int64_t batch_size, bool drop_last);

  // The indices 0..data.size()-1 in order (a DataLoader with shuffle=False
  // and no sampler).
  static absl::StatusOr<DataLoader> Sequential(const TensorDataset& data,
                                               int64_t batch_size,
                                               bool drop_last);

  int64_t num_batches() const;
  // Samples over all batches (after drop_last).
  int64_t num_samples() const;
  int64_t batch_size() const { return batch_size_; }

  // b in [0, num_batches()).
  absl::StatusOr<Batch> GetBatch(int64_t b) const;

 private:
  DataLoader(TensorDataset data, std::vector<int64_t> indices,
             int64_t batch_size, bool drop_last)
      : data_(std::move(data)),
        indices_(std::move(indices)),
        batch_size_(batch_size),
        drop_last_(drop_last) {}

  TensorDataset data_;
  std::vector<int64_t> indices_;
  int64_t batch_size_;
  bool drop_last_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATA_LOADER_H_
