// SyntheticImages: a map-style data set of labelled random images that a
// PyTorch script can draw bit for bit, for training an image model with no
// image files (resnet_ddp --data=synthetic; bench/peers/resnet_ddp.py draws
// the same images).
//
//   // Images 0..511 of a run, then its held-out images 512..639.
//   auto train = std::make_shared<SyntheticImages>(512, 0, 10, 32, seed);
//   auto val = std::make_shared<SyntheticImages>(128, 512, 10, 32, seed);
//
// Sample i of SyntheticImages(size, first, num_classes, S, seed) is image
// k = first + i of the run, what PyTorch draws after
// torch.manual_seed(seed + 1 + k):
//   x = torch.randn(3, S, S)        (float32, tandem's Generator::Normal)
//   y = k % num_classes
//   x[(y // S) % 3, y % S, :] += 2  (a bright row: the class is learnable)
// Get ignores the generator it is given (nothing random is left to draw).
// Thread-safety: const; Get may run on many threads at once.
#ifndef TANDEM_TRAIN_DATA_SYNTHETIC_IMAGES_H_
#define TANDEM_TRAIN_DATA_SYNTHETIC_IMAGES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "train/data/map_dataset.h"

namespace tandem::train {

class SyntheticImages final : public MapDataset {
 public:
  // size >= 0, num_classes >= 1, image_size >= 1.
  SyntheticImages(int64_t size, int64_t first, int64_t num_classes,
                  int64_t image_size, uint64_t seed)
      : size_(size),
        first_(first),
        num_classes_(num_classes),
        image_size_(image_size),
        seed_(seed) {}
  int64_t size() const override { return size_; }
  // Features [3, S, S] float32; OutOfRange outside [0, size()).
  absl::StatusOr<Sample> Get(int64_t index, Generator& gen) const override;
  // "synthetic image k (seed seed + 1 + k)".
  std::string Describe(int64_t index) const override;

 private:
  int64_t size_;
  int64_t first_;
  int64_t num_classes_;
  int64_t image_size_;
  uint64_t seed_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_SYNTHETIC_IMAGES_H_
