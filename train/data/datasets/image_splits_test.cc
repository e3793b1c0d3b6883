// LoadImageSplits: synthetic images, an image folder with a held-out
// fraction, one with train/ and val/, and the folders it refuses (each
// message begins with `who`).
#include "train/data/datasets/image_splits.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "train/data/image_testing.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// The digits rendered as images come from this file (image_testing.h).
constexpr char kDigits[] = "train/data/digits.csv.gz";

// A folder below the test's own temporary folder, empty.
std::string TestDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  return dir.string();
}

std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = i;
  return out;
}

TEST(ImageSplitsTest, SyntheticImagesFromTheSeed) {
  absl::StatusOr<ImageSplits> data = LoadImageSplits(
      {.image_size = 8, .num_classes = 4, .synthetic_size = 8, .seed = 3});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_classes, 4);
  EXPECT_EQ(data->train_indices, Range(8));
  EXPECT_EQ(data->val_indices, Range(2));  // a quarter held out
  EXPECT_EQ(data->fingerprint, "synthetic");
  EXPECT_EQ(data->description,
            "synthetic images (8 train, 2 held out, 4 classes, from --seed)");
  Generator gen(0);
  absl::StatusOr<Sample> image = data->val->Get(0, gen);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->features.shape(), (std::vector<int64_t>{3, 8, 8}));
  // Ten classes unless told.
  EXPECT_EQ(LoadImageSplits({.synthetic_size = 4})->num_classes, 10);
}

TEST(ImageSplitsTest, AFolderHoldsOutAFixedFraction) {
  const std::string root = TestDir("digits");
  ASSERT_TRUE(testing::WriteDigitsFolder(root, kDigits, 2).ok());
  const ImageSplitOptions options{
      .data = root, .image_size = 8, .val_fraction = 0.2, .split_seed = 7};
  absl::StatusOr<ImageSplits> data = LoadImageSplits(options);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_classes, 10);
  // One folder listed twice (augmented and not), split by two index lists.
  EXPECT_EQ(data->train->size(), 20);
  EXPECT_EQ(data->val->size(), 20);
  ASSERT_EQ(data->val_indices.size(), 4u);  // llround(0.2 * 20)
  ASSERT_EQ(data->train_indices.size(), 16u);
  // The first four of Generator(split_seed)'s permutation are held out.
  const std::vector<int64_t> order = Generator(7).Randperm(20);
  EXPECT_EQ(data->val_indices,
            std::vector<int64_t>(order.begin(), order.begin() + 4));
  std::vector<int64_t> all = data->train_indices;
  all.insert(all.end(), data->val_indices.begin(), data->val_indices.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Range(20));
  EXPECT_EQ(data->description,
            root + " (16 train, 4 held out by --val_fraction=0.2), 10 classes");
  EXPECT_EQ(data->fingerprint.size(), 16u);
  // The fingerprint is the listing's, not the path's or the split's.
  const std::string moved = TestDir("moved");
  std::filesystem::rename(root, moved);
  absl::StatusOr<ImageSplits> again = LoadImageSplits(
      {.data = moved, .image_size = 8, .val_fraction = 0.5, .split_seed = 1});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->fingerprint, data->fingerprint);
}

TEST(ImageSplitsTest, AFolderWithTrainAndValSubfolders) {
  const std::string root = TestDir("split");
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/train", kDigits, 2).ok());
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/val", kDigits, 1).ok());
  absl::StatusOr<ImageSplits> data =
      LoadImageSplits({.data = root, .image_size = 8});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_classes, 10);
  EXPECT_EQ(data->train_indices, Range(20));
  EXPECT_EQ(data->val_indices, Range(10));
  EXPECT_EQ(data->description, root + "/train (20 images) and " + root +
                                   "/val (10 held out), 10 classes");
  EXPECT_THAT(data->fingerprint, HasSubstr("-"));
  Generator gen(0);
  absl::StatusOr<Sample> image = data->train->Get(0, gen);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->features.shape(), (std::vector<int64_t>{3, 8, 8}));
}

TEST(ImageSplitsTest, RefusedFoldersBeginWithWho) {
  const std::string root = TestDir("refused");
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/all", kDigits, 1).ok());
  // --num_classes other than the folder's.
  EXPECT_EQ(
      LoadImageSplits({.data = root + "/all", .num_classes = 7, .who = "demo"})
          .status(),
      absl::InvalidArgumentError(
          "demo: --num_classes=7 but " + root +
          "/all has 10 class folder(s); drop --num_classes or pass 10"));
  // One class, and a train/val layout with only train/.
  std::filesystem::create_directories(root + "/one");
  std::filesystem::rename(root + "/all/3", root + "/one/3");
  EXPECT_THAT(LoadImageSplits({.data = root + "/one", .who = "demo"})
                  .status()
                  .message(),
              HasSubstr("demo: " + root +
                        "/one has 1 class folder(s) (3); a classifier needs "
                        "at least two. Expected "));
  std::filesystem::create_directories(root + "/only_train");
  std::filesystem::rename(root + "/all", root + "/only_train/train");
  EXPECT_THAT(LoadImageSplits({.data = root + "/only_train", .who = "demo"})
                  .status()
                  .message(),
              HasSubstr("It looks like a train/val layout with only train/"));
  // A held-out fraction that empties a split; no `who`, no prefix.
  EXPECT_EQ(
      LoadImageSplits(
          {.data = root + "/only_train/train", .val_fraction = 0.01})
          .status(),
      absl::InvalidArgumentError(
          root + "/only_train/train has 9 image(s); --val_fraction=0.01 holds "
                 "out 0, which leaves a split empty; add images, change "
                 "--val_fraction, or give the folder train/ and val/ "
                 "sub-folders"));
  // Options out of range.
  EXPECT_EQ(LoadImageSplits({.image_size = 0, .who = "demo"}).status(),
            absl::InvalidArgumentError(
                "demo: --image_size=0 (expected image_size >= 1)"));
  EXPECT_EQ(LoadImageSplits({.val_fraction = 1}).status(),
            absl::InvalidArgumentError(
                "--val_fraction=1 (expected 0 < val_fraction < 1)"));
}

TEST(ImageSplitsTest, TrainAndValMustListTheSameClasses) {
  const std::string root = TestDir("differ");
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/train", kDigits, 1).ok());
  ASSERT_TRUE(testing::WriteDigitsFolder(root + "/val", kDigits, 1).ok());
  std::filesystem::remove_all(root + "/val/9");
  EXPECT_THAT(LoadImageSplits({.data = root, .who = "demo"}).status().message(),
              HasSubstr("demo: " + root +
                        "/train has the classes [0, 1, 2, 3, 4, 5, "
                        "6, 7, 8, 9] but " +
                        root +
                        "/val has [0, 1, 2, 3, 4, 5, 6, "
                        "7, 8]; both need the same class folders"));
}

}  // namespace
}  // namespace tandem::train
