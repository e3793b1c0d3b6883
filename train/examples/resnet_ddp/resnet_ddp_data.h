// resnet_ddp's data: the training and held-out images, from a folder
// (torchvision's ImageFolder layout) or drawn from the seed.
//
//   TANDEM_ASSIGN_OR_RETURN(ResnetData data, LoadResnetData({
//       .data = "synthetic", .image_size = 32, .num_classes = 10}));
//   // data.train, data.val: MapDatasets of [3, 32, 32] float32 images;
//   // data.train_indices / data.val_indices: which of their samples
//   // belong to each split.
//
// Synthetic (--data=synthetic): `synthetic_size` training and
// max(1, synthetic_size / 4) held-out images, images 0, 1, ... of the run
// drawn from --seed by train/data/synthetic_images.h's recipe (training
// images first, then the held-out ones; 10 classes unless --num_classes),
// so bench/peers/resnet_ddp.py builds the same images.
//
// A folder (--data=DIR): when DIR has both a train/ and a val/ sub-folder
// (torchvision's ImageNet layout) they are the two splits, and must list the
// same classes. Otherwise DIR itself is the image folder and a fixed
// `val_fraction` of it (the first llround(val_fraction * n) of a
// permutation drawn from Generator(split_seed)) is held out. Training
// images: Resize(image_size) (the shorter side), CenterCrop(image_size),
// RandomCrop(image_size, padding image_size / 8), RandomHorizontalFlip,
// Normalize(ImageNet's mean and std); held-out images the same without the
// two random steps (train/data/image_transforms.h).
//
// Thread-safety: the datasets are const and shared; Get runs on many
// threads.
#ifndef TANDEM_TRAIN_EXAMPLES_RESNET_DDP_RESNET_DDP_DATA_H_
#define TANDEM_TRAIN_EXAMPLES_RESNET_DDP_RESNET_DDP_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/data/map_dataset.h"
#include "train/examples/resnet_ddp/resnet_ddp_lib.h"

namespace tandem::train {

struct ResnetData {
  std::shared_ptr<const MapDataset> train;
  std::vector<int64_t> train_indices;  // samples of `train` to train on
  std::shared_ptr<const MapDataset> val;
  std::vector<int64_t> val_indices;  // samples of `val` held out
  int64_t num_classes = 0;
  std::string description;  // one line: where the images come from
  // What the images are, for a resume to compare: a folder's listing (each
  // file's path below the folder, class and size) hashed; "synthetic" for
  // synthetic images (their flags say the rest).
  std::string fingerprint;
};

// The images of `options` (--data and the options after it in the list).
// InvalidArgument / NotFound naming the folder or the value: an option that
// breaks its rule, a missing or unreadable folder, a folder without classes, a
// train/ and val/ whose classes differ, --num_classes other than the
// folder's, a split that leaves either side empty. Only lists the folder:
// the files are read as batches are made.
absl::StatusOr<ResnetData> LoadResnetData(const ResnetOptions& options);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RESNET_DDP_RESNET_DDP_DATA_H_
