// Image splits: a classifier's training and held-out images, from a folder
// (torchvision's ImageFolder layout) or drawn from a seed.
//
//   TANDEM_ASSIGN_OR_RETURN(ImageSplits data, LoadImageSplits({
//       .data = "synthetic", .image_size = 32, .num_classes = 10}));
//   // data.train, data.val: MapDatasets of [3, 32, 32] float32 images;
//   // data.train_indices / data.val_indices: which of their samples
//   // belong to each split.
//
// Synthetic (data == "synthetic"): `synthetic_size` training and
// max(1, synthetic_size / 4) held-out images, images 0, 1, ... of the run
// drawn from `seed` by train/data/synthetic_images.h's recipe (training
// images first, then the held-out ones; 10 classes unless `num_classes`),
// so bench/peers/resnet_ddp.py builds the same images.
//
// A folder (data == DIR): when DIR has both a train/ and a val/ sub-folder
// (torchvision's ImageNet layout) they are the two splits, and must list the
// same classes. Otherwise DIR itself is the image folder and a fixed
// `val_fraction` of it (the first llround(val_fraction * n) of a
// permutation drawn from Generator(split_seed)) is held out. Training
// images: Resize(image_size) (the shorter side), CenterCrop(image_size),
// RandomCrop(image_size, padding image_size / 8), RandomHorizontalFlip,
// Normalize(ImageNet's mean and std); held-out images the same without the
// two random steps (train/data/image_transforms.h).
//
// Errors name the options as the flags that usually carry them
// (--num_classes, --val_fraction, --seed).
//
// Thread-safety: the datasets are const and shared; Get runs on many
// threads.
#ifndef TANDEM_TRAIN_DATA_DATASETS_IMAGE_SPLITS_H_
#define TANDEM_TRAIN_DATA_DATASETS_IMAGE_SPLITS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/data/map_dataset.h"

namespace tandem::train {

struct ImageSplitOptions {
  std::string data = "synthetic";  // an image folder, or "synthetic"
  int64_t image_size = 32;         // images are image_size x image_size
  int64_t num_classes = 0;         // 0: the folder's count (10 for synthetic)
  int64_t synthetic_size = 512;    // training images when synthetic
  double val_fraction = 0.1;       // held out of a folder without train/, val/
  uint64_t split_seed = 42;        // the held-out permutation's seed
  uint64_t seed = 0;               // the synthetic images' seed
  // What every error this loader writes itself begins with, followed by
  // ": " ("resnet_ddp"); empty: nothing. The image folder's own errors
  // (a missing folder, no classes) come as they are.
  std::string who = {};
};

struct ImageSplits {
  std::shared_ptr<const MapDataset> train;
  std::vector<int64_t> train_indices;  // samples of `train` to train on
  std::shared_ptr<const MapDataset> val;
  std::vector<int64_t> val_indices;  // samples of `val` held out
  int64_t num_classes = 0;
  std::string description;  // one line: where the images come from
  // What the images are, for a resume to compare: a folder's listing (each
  // file's path below the folder, class and size) hashed; "synthetic" for
  // synthetic images (their options say the rest).
  std::string fingerprint;
};

// The images of `options`. InvalidArgument / NotFound naming the folder or
// the value: an option out of its range (image_size and synthetic_size at
// least 1, num_classes at least 0, val_fraction in (0, 1)), a missing or
// unreadable folder, a folder without classes or with one, a train/ and
// val/ whose classes differ, num_classes other than the folder's, a split
// that leaves either side empty. Only lists the folder: the files are read
// as batches are made.
absl::StatusOr<ImageSplits> LoadImageSplits(const ImageSplitOptions& options);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATASETS_IMAGE_SPLITS_H_
