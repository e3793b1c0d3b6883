// ImageFolderDataset: images in one folder per class, as
// torchvision.datasets.ImageFolder(root, transform) reads them.
//
//   root/cat/001.png   -> class 0 ("cat")
//   root/cat/x/002.jpg -> class 0 (sub-folders belong to their class)
//   root/dog/003.jpeg  -> class 1 ("dog")
//
//   TANDEM_ASSIGN_OR_RETURN(
//       std::shared_ptr<const ImageFolderDataset> train,
//       ImageFolderDataset::Create("data/train", {.transform = {
//           .random_crop = 32, .random_crop_padding = 4,
//           .random_horizontal_flip = true,
//           .mean = {0.4914f, 0.4822f, 0.4465f},
//           .std = {0.2470f, 0.2435f, 0.2616f}}}));
//   DistributedSampler sampler = *DistributedSampler::Create(
//       train->size(), {.num_replicas = world, .rank = rank, .seed = seed});
//   sampler.SetEpoch(epoch);
//   TANDEM_ASSIGN_OR_RETURN(DataLoader loader, DataLoader::Create(
//       train, sampler.Indices(), 32, /*drop_last=*/true, rank_gen,
//       {.num_workers = 4}));
//
// The listing is torchvision 0.14's (datasets/folder.py), so class indices
// and sample order equal ImageFolder's on the same folder (checked by
// image_folder_peer_test):
// - classes: the root's entries that are directories (symbolic links
//   followed, hidden names included), sorted by name; class i is the i-th;
// - samples: for each class in that order, every directory under the class
//   folder (symbolic links followed) sorted by full path, and in each the
//   entries that are not directories sorted by name, kept when the name ends,
//   ignoring ASCII case, with one of `extensions` (torchvision's
//   IMG_EXTENSIONS by default; the content decides the format, see
//   image_decode.h, so a .bmp file that is no PNG or JPEG fails when read).
// Names compare as bytes, which is Python's order for UTF-8 names.
// Where torchvision is silent tandem fails: a sub-folder that cannot be
// read (os.walk skips it) and a symbolic-link cycle (os.walk follows it
// until the path is too long) are errors naming the folder.
//
// Create fails (NotFound / InvalidArgument, naming the folder and what to
// do) when the root is no readable folder, has no class folder, or when a
// class has no file with an allowed extension (every such class is named,
// as torchvision's "Found no valid file for the classes ..." does). Files
// are read only by Get: an unreadable, corrupt, truncated or unsupported file
// fails that sample's Get with the file's path and the reason, and the data
// set stays usable. Thread-safe: const after Create; Get may run on many
// threads at once.
#ifndef TANDEM_TRAIN_DATA_IMAGE_FOLDER_H_
#define TANDEM_TRAIN_DATA_IMAGE_FOLDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "train/data/image_transforms.h"
#include "train/data/map_dataset.h"

namespace tandem::train {

struct ImageFolderOptions {
  ImageTransform transform = {};  // image_transforms.h; default: ToTensor only
  // Lower-case endings of the files that count (torchvision's
  // IMG_EXTENSIONS).
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png",
                                         ".ppm", ".bmp",  ".pgm",
                                         ".tif", ".tiff", ".webp"};
};

class ImageFolderDataset final : public MapDataset {
 public:
  struct Entry {
    std::string path;  // root joined with the path below it, as Python's
    int64_t label = 0;
  };

  // Lists the folder (no file is opened); checks the transform
  // (CheckImageTransform).
  static absl::StatusOr<std::shared_ptr<const ImageFolderDataset>> Create(
      const std::string& root, const ImageFolderOptions& options = {});

  int64_t size() const override {
    return static_cast<int64_t>(samples_.size());
  }
  // Decodes samples()[index].path (image_decode.h) and applies the
  // transform with `gen`: features [3, H, W] float32, label its class.
  absl::StatusOr<Sample> Get(int64_t index, Generator& gen) const override;
  std::string Describe(int64_t index) const override;

  const std::string& root() const { return root_; }
  const std::vector<std::string>& classes() const { return classes_; }
  const std::vector<Entry>& samples() const { return samples_; }
  const ImageFolderOptions& options() const { return options_; }

 private:
  ImageFolderDataset(std::string root, ImageFolderOptions options,
                     std::vector<std::string> classes,
                     std::vector<Entry> samples)
      : root_(std::move(root)),
        options_(std::move(options)),
        classes_(std::move(classes)),
        samples_(std::move(samples)) {}

  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::vector<Entry> samples_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_IMAGE_FOLDER_H_
