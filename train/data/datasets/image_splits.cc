#include "train/data/datasets/image_splits.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/generator.h"
#include "train/data/image_folder.h"
#include "train/data/image_transforms.h"
#include "train/data/synthetic_images.h"
#include "train/parallel/core/config_agreement.h"

namespace tandem::train {
namespace {

bool IsFolder(const std::string& path) {
  std::error_code error;
  return std::filesystem::is_directory(path, error);
}

// ImageNet's per-channel mean and std (torchvision's reference scripts).
ImageTransform EvalTransform(int64_t size) {
  return {.resize = size,
          .center_crop = size,
          .mean = {0.485f, 0.456f, 0.406f},
          .std = {0.229f, 0.224f, 0.225f}};
}

ImageTransform TrainTransform(int64_t size) {
  ImageTransform t = EvalTransform(size);
  t.random_crop = size;
  t.random_crop_padding = size / 8;
  t.random_horizontal_flip = true;
  return t;
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i;
  return out;
}

// What the errors of `options` begin with.
std::string Who(const ImageSplitOptions& options) {
  return options.who.empty() ? "" : absl::StrCat(options.who, ": ");
}

// The options' ranges: what the loader needs to be defined.
absl::Status CheckOptions(const ImageSplitOptions& o) {
  std::string broken;
  if (o.image_size < 1) {
    broken = absl::StrCat("--image_size=", o.image_size,
                          " (expected image_size >= 1)");
  } else if (o.num_classes < 0) {
    broken = absl::StrCat("--num_classes=", o.num_classes,
                          " (expected num_classes >= 0)");
  } else if (o.synthetic_size < 1) {
    broken = absl::StrCat("--synthetic_size=", o.synthetic_size,
                          " (expected synthetic_size >= 1)");
  } else if (!(o.val_fraction > 0 && o.val_fraction < 1)) {
    broken = absl::StrCat("--val_fraction=", o.val_fraction,
                          " (expected 0 < val_fraction < 1)");
  }
  if (broken.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(Who(o), broken));
}

absl::Status CheckClassCount(const ImageSplitOptions& options,
                             const std::string& folder,
                             const std::vector<std::string>& classes) {
  const int64_t found = static_cast<int64_t>(classes.size());
  if (found < 2) {
    // One class trains to loss 0 and top-1 1.0, which says nothing.
    const std::string& root = options.data;
    const bool only_split =
        found == 1 && (classes[0] == "train" || classes[0] == "val");
    return absl::InvalidArgumentError(absl::StrCat(
        Who(options), folder, " has ", found, " class folder(s)",
        found == 1 ? absl::StrCat(" (", classes[0], ")") : "",
        "; a classifier needs at least two. ",
        only_split ? absl::StrCat("It looks like a train/val layout with only ",
                                  classes[0], "/: give ", root,
                                  " both train/ and val/. ")
                   : "",
        "Expected ", root, "/<class>/<images> (one sub-folder per class) or ",
        root, "/train/<class>/... and ", root, "/val/<class>/..."));
  }
  if (options.num_classes == 0 || options.num_classes == found) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Who(options), "--num_classes=", options.num_classes, " but ", folder,
      " has ", found, " class folder(s); drop --num_classes or pass ", found));
}

// A folder's listing as ImageSplits::fingerprint: every sample's path below
// `root`, its class and its size (stat; -1 when it cannot be read), in order.
std::string ListingFingerprint(const std::string& root,
                               const ImageFolderDataset& images) {
  uint64_t hash = HashBytes(nullptr, 0);
  for (const ImageFolderDataset::Entry& e : images.samples()) {
    const std::string below =
        e.path.substr(std::min(root.size(), e.path.size()));
    struct stat st;
    const int64_t size = ::stat(e.path.c_str(), &st) == 0
                             ? static_cast<int64_t>(st.st_size)
                             : -1;
    hash = HashBytes(below.data(), below.size(), hash);
    hash = HashBytes(&e.label, sizeof(e.label), hash);
    hash = HashBytes(&size, sizeof(size), hash);
  }
  return HashHex(hash);
}

absl::StatusOr<ImageSplits> LoadSynthetic(const ImageSplitOptions& options) {
  const int64_t classes =
      options.num_classes == 0 ? int64_t{10} : options.num_classes;
  const int64_t n_val = std::max<int64_t>(1, options.synthetic_size / 4);
  ImageSplits out;
  out.train = std::make_shared<SyntheticImages>(
      options.synthetic_size, 0, classes, options.image_size, options.seed);
  out.val = std::make_shared<SyntheticImages>(
      n_val, options.synthetic_size, classes, options.image_size, options.seed);
  out.train_indices = Range(options.synthetic_size);
  out.val_indices = Range(n_val);
  out.num_classes = classes;
  out.fingerprint = "synthetic";
  out.description =
      absl::StrCat("synthetic images (", options.synthetic_size, " train, ",
                   n_val, " held out, ", classes, " classes, from --seed)");
  return out;
}

// A folder with train/ and val/ (`split`), or one whose held-out images a
// permutation picks.
absl::StatusOr<ImageSplits> LoadFolder(const ImageSplitOptions& options) {
  const std::string& root = options.data;
  const bool split = IsFolder(root + "/train") && IsFolder(root + "/val");
  const std::string train_dir = split ? root + "/train" : root;
  const std::string val_dir = split ? root + "/val" : root;
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<const ImageFolderDataset> train,
      ImageFolderDataset::Create(
          train_dir, {.transform = TrainTransform(options.image_size)}));
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<const ImageFolderDataset> val,
      ImageFolderDataset::Create(
          val_dir, {.transform = EvalTransform(options.image_size)}));
  if (split && train->classes() != val->classes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Who(options), train_dir, " has the classes [",
                     absl::StrJoin(train->classes(), ", "), "] but ", val_dir,
                     " has [", absl::StrJoin(val->classes(), ", "),
                     "]; both need the same class folders"));
  }
  TANDEM_RETURN_IF_ERROR(CheckClassCount(options, train_dir, train->classes()));
  ImageSplits out;
  out.num_classes = static_cast<int64_t>(train->classes().size());
  if (split) {
    out.train_indices = Range(train->size());
    out.val_indices = Range(val->size());
    out.fingerprint = absl::StrCat(ListingFingerprint(root, *train), "-",
                                   ListingFingerprint(root, *val));
    out.description = absl::StrCat(train_dir, " (", train->size(),
                                   " images) and ", val_dir, " (", val->size(),
                                   " held out), ", out.num_classes, " classes");
  } else {
    const int64_t n = train->size();
    const int64_t n_val =
        static_cast<int64_t>(std::llround(options.val_fraction * n));
    if (n_val < 1 || n - n_val < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          Who(options), root, " has ", n, " image(s); --val_fraction=",
          options.val_fraction, " holds out ", n_val,
          ", which leaves a split empty; add images, change --val_fraction, "
          "or give the folder train/ and val/ sub-folders"));
    }
    const std::vector<int64_t> order =
        Generator(options.split_seed).Randperm(n);
    out.val_indices.assign(order.begin(), order.begin() + n_val);
    out.train_indices.assign(order.begin() + n_val, order.end());
    out.fingerprint = ListingFingerprint(root, *train);
    out.description =
        absl::StrCat(root, " (", n - n_val, " train, ", n_val,
                     " held out by --val_fraction=", options.val_fraction,
                     "), ", out.num_classes, " classes");
  }
  out.train = std::move(train);
  out.val = std::move(val);
  return out;
}

}  // namespace

absl::StatusOr<ImageSplits> LoadImageSplits(const ImageSplitOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckOptions(options));
  if (options.data == "synthetic") return LoadSynthetic(options);
  return LoadFolder(options);
}

}  // namespace tandem::train
