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
//
// A MapDataset (train/data/map_dataset.h: samples made on demand, such as
// ImageFolderDataset) is batched the same way, its samples made by workers:
//
//   TANDEM_ASSIGN_OR_RETURN(DataLoader loader, DataLoader::Create(
//       images, sampler.Indices(), /*batch_size=*/32, /*drop_last=*/true,
//       rank_gen, {.num_workers = 4}));
//
// Create draws one 32-bit seed per sample of the epoch from the rank's
// generator, in the order of `indices`; sample k of the epoch is made with
// Generator(seed k), whichever worker makes it and whenever. So random
// augmentations are reproducible from the rank's seed, independent of
// num_workers and of the thread schedule, and GetBatch stays a const,
// random-access call. (PyTorch seeds each worker process instead, so its
// augmentations depend on num_workers; tandem's do not.) Creating the
// loader for the next epoch draws the next seeds, as PyTorch's iterator
// does.
#ifndef TANDEM_TRAIN_DATA_DATA_LOADER_H_
#define TANDEM_TRAIN_DATA_DATA_LOADER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/data/dataset.h"
#include "train/data/map_dataset.h"

namespace tandem::train {

struct Batch {
  Tensor features;  // [b, ...] same dtype as the dataset's features
  Tensor labels;    // [b] int64
};

struct MapLoaderOptions {
  // Threads that make a batch's samples alongside the calling thread; 0:
  // the calling thread alone (PyTorch's num_workers=0). A batch never uses
  // more threads than it has samples.
  int64_t num_workers = 0;
};

class DataLoader {
 public:
  // `indices`: this epoch's order (e.g. DistributedSampler::Indices(), or
  // 0..n-1); each must lie in [0, data.size()). batch_size >= 1. The error
  // names the offending position and value.
  static absl::StatusOr<DataLoader> Create(const TensorDataset& data,
                                           std::vector<int64_t> indices,
                                           int64_t batch_size, bool drop_last);

  // Batches of a MapDataset: indices and batching as above; draws
  // num_samples() values from `gen` (see the top of this file). Fails like
  // the TensorDataset form, for a null data set, or for num_workers < 0 or
  // above 1024. The data set is shared, not copied.
  static absl::StatusOr<DataLoader> Create(
      std::shared_ptr<const MapDataset> data, std::vector<int64_t> indices,
      int64_t batch_size, bool drop_last, Generator& gen,
      const MapLoaderOptions& options = {});

  // The indices 0..data.size()-1 in order (a DataLoader with shuffle=False
  // and no sampler).
  static absl::StatusOr<DataLoader> Sequential(const TensorDataset& data,
                                               int64_t batch_size,
                                               bool drop_last);

  int64_t num_batches() const;
  // Samples over all batches (after drop_last).
  int64_t num_samples() const;
  int64_t batch_size() const { return batch_size_; }

  // b in [0, num_batches()). For a MapDataset: blocks until the batch's
  // samples are made (every worker thread is joined before it returns, on
  // success or error); the first failing sample in batch order gives the
  // error, prefixed with its batch position, and samples of other shapes
  // than the batch's first fail naming both (add a crop to the transform).
  absl::StatusOr<Batch> GetBatch(int64_t b) const;

 private:
  DataLoader(TensorDataset data, std::vector<int64_t> indices,
             int64_t batch_size, bool drop_last)
      : data_(std::move(data)),
        indices_(std::move(indices)),
        batch_size_(batch_size),
        drop_last_(drop_last) {}

  absl::StatusOr<Batch> GetMapBatch(int64_t begin, int64_t count) const;

  TensorDataset data_;  // unused with a MapDataset
  std::vector<int64_t> indices_;
  int64_t batch_size_;
  bool drop_last_;
  // With a MapDataset: the data set, each sample's seed (by position in
  // indices_), and the worker count.
  std::shared_ptr<const MapDataset> source_;
  std::vector<uint32_t> sample_seeds_;
  int64_t num_workers_ = 0;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATA_LOADER_H_
