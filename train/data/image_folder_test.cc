// ImageFolderDataset on folders built here: torchvision's listing rules,
// PNG pixels exactly as written, per-rank shards through the
// DistributedSampler and the DataLoader's workers, and every bad file or
// folder failing with its name and reason while the rest stays usable.
#include "train/data/image_folder.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/data/data_loader.h"
#include "train/data/distributed_sampler.h"
#include "train/data/image_testing.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string SmallPng(uint8_t level) {
  return *testing::EncodePng({.width = 2,
                              .height = 2,
                              .color_type = 0,
                              .samples = std::vector<uint8_t>(4, level)});
}

void Put(const std::string& path, const std::string& bytes) {
  ASSERT_TRUE(testing::WriteFile(path, bytes).ok()) << path;
}

std::vector<std::string> Relative(const ImageFolderDataset& data) {
  std::vector<std::string> out;
  for (const auto& entry : data.samples()) {
    out.push_back(entry.path.substr(data.root().size() + 1));
  }
  return out;
}

// Classes: directories only (hidden ones too), sorted as bytes; samples:
// per class, folders sorted by full path ("b-x" before "b/deep"), names
// sorted as bytes ("Z" before "a"), extensions matched ignoring case,
// other files skipped.
TEST(ImageFolderTest, ListsLikeTorchvision) {
  const std::string root = TempDir("listing");
  Put(root + "/b/z.png", SmallPng(1));
  Put(root + "/b/Z.PNG", SmallPng(2));
  Put(root + "/b/b/deep/x.jpg", SmallPng(3));  // content decides: a PNG
  Put(root + "/b/b-x/y.Png", SmallPng(4));
  Put(root + "/b/readme.txt", "text");
  Put(root + "/a/one.webp", SmallPng(5));
  Put(root + "/.hidden/h.tiff", SmallPng(6));
  Put(root + "/C/c.jpeg", SmallPng(7));
  Put(root + "/stray.png", SmallPng(8));  // a file at the top: no class
  std::filesystem::create_directory_symlink(root + "/a", root + "/linked");
  auto data = ImageFolderDataset::Create(root);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT((*data)->classes(),
              ElementsAre(".hidden", "C", "a", "b", "linked"));
  EXPECT_THAT(Relative(**data),
              ElementsAre(".hidden/h.tiff", "C/c.jpeg", "a/one.webp", "b/Z.PNG",
                          "b/z.png", "b/b-x/y.Png", "b/b/deep/x.jpg",
                          "linked/one.webp"));
  std::vector<int64_t> labels;
  for (const auto& entry : (*data)->samples()) labels.push_back(entry.label);
  EXPECT_THAT(labels, ElementsAre(0, 1, 2, 3, 3, 3, 3, 4));
  // Sample 3 is b/Z.PNG, grey level 2: ToTensor gives 2 / 255.
  Generator gen(0);
  absl::StatusOr<Sample> sample = (*data)->Get(3, gen);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->label, 3);
  EXPECT_EQ(sample->features.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(sample->features.ToVector<float>()->at(0), 2.0f / 255.0f);
}

// (a) Every PNG of the digits folder decodes to exactly the pixels written;
// the JPEGs within JPEG's loss of them (quality 90; PIL's exact values are
// image_folder_peer_test's).
TEST(ImageFolderTest, DigitsDecodeToWhatWasWritten) {
  const std::string root = TempDir("digits");
  absl::StatusOr<testing::DigitsFolder> folder =
      testing::WriteDigitsFolder(root, "train/data/digits.csv.gz", 8);
  ASSERT_TRUE(folder.ok()) << folder.status();
  auto data = ImageFolderDataset::Create(root);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ((*data)->size(), 80);
  EXPECT_THAT((*data)->classes(),
              ElementsAre("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"));
  const std::vector<std::string> names = Relative(**data);
  // slack: the largest mean absolute difference in levels (0: exact).
  auto check = [&](const std::string& name, const RgbImage& want,
                   double slack) {
    SCOPED_TRACE(name);
    const auto it = std::find(names.begin(), names.end(), name);
    ASSERT_NE(it, names.end());
    const int64_t index = it - names.begin();
    EXPECT_EQ((*data)->samples()[index].label, name[0] - '0');
    Generator gen(0);
    absl::StatusOr<Sample> sample = (*data)->Get(index, gen);
    ASSERT_TRUE(sample.ok()) << sample.status();
    ASSERT_EQ(sample->features.shape(), (Shape{3, 32, 32}));
    const std::vector<float> got = *sample->features.ToVector<float>();
    double total = 0;
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 32 * 32; ++i) {
        const int value = static_cast<int>(got[c * 1024 + i] * 255.0f + 0.5f);
        if (slack == 0) {
          ASSERT_EQ(got[c * 1024 + i],
                    static_cast<float>(want.pixels[i * 3 + c]) / 255.0f);
        }
        total += std::abs(value - want.pixels[i * 3 + c]);
      }
    }
    EXPECT_LE(total / (3 * 32 * 32), slack);
  };
  for (const auto& [name, image] : folder->png) check(name, image, 0);
  // Saturated 4x4 blocks at quality 90 with 4:2:0 chroma lose up to ~10
  // levels on average (single pixels at colour edges ~120).
  for (const auto& [name, image] : folder->jpeg) check(name, image, 16);
  // Class 3's sub-folders in Python's order.
  std::vector<std::string> class3;
  for (const std::string& n : names) {
    if (n[0] == '3') class3.push_back(n);
  }
  EXPECT_THAT(class3,
              ElementsAre("3/Img_006.JPEG", "3/img_000.png", "3/img_001.PNG",
                          "3/img_002.jpg", "3/img_004.png", "3/img_005.PNG",
                          "3/sub-x/p_007.png", "3/sub/deeper/p_003.png"));
}

// Two ranks' shards (DistributedSampler) through loaders with workers: the
// shards are disjoint, cover the folder, and each sample carries its class.
TEST(ImageFolderTest, ShardsPerRankThroughTheLoaderWorkers) {
  const std::string root = TempDir("shards");
  ASSERT_TRUE(
      testing::WriteDigitsFolder(root, "train/data/digits.csv.gz", 3).ok());
  auto data = ImageFolderDataset::Create(
      root, {.transform = {.random_crop = 32,
                           .random_crop_padding = 2,
                           .random_horizontal_flip = true,
                           .mean = {0.5f, 0.5f, 0.5f},
                           .std = {0.25f, 0.25f, 0.25f}}});
  ASSERT_TRUE(data.ok()) << data.status();
  std::set<int64_t> seen;
  for (int64_t rank = 0; rank < 2; ++rank) {
    auto sampler = DistributedSampler::Create(
        (*data)->size(), {.num_replicas = 2, .rank = rank, .seed = 9});
    ASSERT_TRUE(sampler.ok());
    const std::vector<int64_t> indices = sampler->Indices();
    Generator gen(100 + rank);
    auto loader = DataLoader::Create(*data, indices, 4, /*drop_last=*/false,
                                     gen, {.num_workers = 3});
    ASSERT_TRUE(loader.ok()) << loader.status();
    int64_t position = 0;
    for (int64_t b = 0; b < loader->num_batches(); ++b) {
      absl::StatusOr<Batch> batch = loader->GetBatch(b);
      ASSERT_TRUE(batch.ok()) << batch.status();
      EXPECT_EQ(batch->features.shape()[1], 3);
      const std::vector<int64_t> labels = *batch->labels.ToVector<int64_t>();
      for (int64_t label : labels) {
        const int64_t index = indices[position++];
        EXPECT_EQ(label, (*data)->samples()[index].label);
        EXPECT_TRUE(seen.insert(index).second) << index;
      }
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), (*data)->size());
}

TEST(ImageFolderTest, BadFoldersFailNamingThem) {
  const std::string root = TempDir("bad_folders");
  auto missing = ImageFolderDataset::Create(root + "/absent");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(root + "/absent"));

  Put(root + "/flat/a.png", SmallPng(0));
  auto flat = ImageFolderDataset::Create(root + "/flat");
  EXPECT_THAT(flat.status().message(), HasSubstr("no class folder in"));

  Put(root + "/empty/cat/a.png", SmallPng(0));
  Put(root + "/empty/dog/notes.txt", "text");
  std::filesystem::create_directories(root + "/empty/emu");
  auto empty = ImageFolderDataset::Create(root + "/empty");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(empty.status().message(),
              HasSubstr("found no valid file for the classes dog, emu; "
                        "supported extensions are .jpg, .jpeg, .png"));

  Put(root + "/cycle/c/a.png", SmallPng(0));
  std::filesystem::create_directory_symlink(root + "/cycle/c",
                                            root + "/cycle/c/again");
  auto cycle = ImageFolderDataset::Create(root + "/cycle");
  EXPECT_THAT(cycle.status().message(),
              HasSubstr("c/again is one of its own parent folders"));

  auto bad_transform = ImageFolderDataset::Create(
      root + "/empty", {.transform = {.resize = -3}});
  EXPECT_THAT(bad_transform.status().message(), HasSubstr("resize = -3"));
}

// (d) Each bad file fails its own Get and its own batch, naming the file and
// the reason; every other sample still loads.
TEST(ImageFolderTest, BadFilesFailTheirSampleOnly) {
  const std::string root = TempDir("bad_files");
  const std::string png = SmallPng(40);
  const std::string jpeg =
      *testing::EncodeJpeg(8, 8, 3, std::vector<uint8_t>(192, 9), 90);
  Put(root + "/k/0_good.png", png);
  Put(root + "/k/1_text.png", "hello, not an image");
  Put(root + "/k/2_cut.png", png.substr(0, png.size() - 30));
  Put(root + "/k/3_cut.jpg", jpeg.substr(0, jpeg.size() / 2));
  Put(root + "/k/4_deep.png", *testing::EncodePng({.width = 1,
                                                   .height = 1,
                                                   .color_type = 0,
                                                   .bit_depth = 16,
                                                   .samples = {1, 2}}));
  Put(root + "/k/5_empty.jpg", "");
  Put(root + "/k/6_good.jpg", jpeg);
  std::filesystem::create_symlink(root + "/nowhere",
                                  root + "/k/7_dangling.png");
  auto data = ImageFolderDataset::Create(root);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_EQ((*data)->size(), 8);
  const std::vector<std::string> reasons = {
      "",
      "expected a PNG or JPEG image, found not an image",
      "truncated",
      "truncated",
      "16-bit greyscale PNG: unsupported mode",
      "found an empty file",
      "",
      "cannot read the image: "};
  for (int64_t i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    Generator gen(0);
    absl::StatusOr<Sample> sample = (*data)->Get(i, gen);
    if (reasons[i].empty()) {
      EXPECT_TRUE(sample.ok()) << sample.status();
      continue;
    }
    ASSERT_FALSE(sample.ok());
    EXPECT_THAT(sample.status().message(),
                HasSubstr((*data)->samples()[i].path));
    EXPECT_THAT(sample.status().message(), HasSubstr(reasons[i]));
    if (i == 7) {
      EXPECT_THAT(sample.status().message(),
                  HasSubstr("cannot open (No such file"));
    }
  }
  // Through the loader: batches of one; the bad ones fail naming the file,
  // the good ones load, in either order.
  Generator gen(1);
  auto loader = DataLoader::Create(*data, {1, 0, 6, 2}, 1, false, gen,
                                   {.num_workers = 2});
  ASSERT_TRUE(loader.ok());
  absl::StatusOr<Batch> text = loader->GetBatch(0);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("k/1_text.png"));
  EXPECT_TRUE(loader->GetBatch(1).ok());
  EXPECT_TRUE(loader->GetBatch(2).ok());
  EXPECT_THAT(loader->GetBatch(3).status().message(), HasSubstr("2_cut.png"));
  EXPECT_TRUE(loader->GetBatch(1).ok());
}

}  // namespace
}  // namespace tandem::train
