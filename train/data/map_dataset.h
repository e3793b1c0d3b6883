// MapDataset: a data set that makes each sample when asked, like a
// torch.utils.data.Dataset with __getitem__ and __len__ (a map-style data
// set). Where TensorDataset holds every sample in memory, a MapDataset reads
// and transforms one sample per call (ImageFolderDataset decodes a file);
// DataLoader::Create(std::shared_ptr<const MapDataset>, ...) batches it, its
// workers calling Get concurrently.
//
// Randomness: Get draws its random augmentations from the Generator it is
// given, and from nothing else, so a sample's value depends only on the
// dataset, the index and that generator's state (the DataLoader seeds one
// generator per sample from the rank's generator: see data_loader.h).
#ifndef TANDEM_TRAIN_DATA_MAP_DATASET_H_
#define TANDEM_TRAIN_DATA_MAP_DATASET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace tandem::train {

struct Sample {
  Tensor features;  // a CPU tensor, one sample (no batch dimension)
  int64_t label = 0;
};

class MapDataset {
 public:
  virtual ~MapDataset() = default;

  virtual int64_t size() const = 0;

  // Sample `index`, 0 <= index < size(). Thread-safe: the DataLoader's
  // workers call it concurrently (each with its own generator). Errors name
  // what failed (the file, the reason) and leave the data set usable.
  virtual absl::StatusOr<Sample> Get(int64_t index, Generator& gen) const = 0;

  // What sample `index` is, for errors about it (a file path, say).
  virtual std::string Describe(int64_t index) const;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_MAP_DATASET_H_
