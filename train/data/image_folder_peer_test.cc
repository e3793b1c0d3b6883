// ImageFolderDataset against torchvision 0.14 + PIL on the same folder (the
// digits rendered as PNG and JPEG, plus one image of every PNG mode and a
// greyscale JPEG, of odd sizes): (b) the same classes, sample order and
// labels, and (a) the same tensors, for ToTensor alone (the decoders), for a
// training pipeline drawn from the seed (Resize up, CenterCrop, RandomCrop
// with padding, RandomHorizontalFlip, Normalize) and for a shrinking one
// (PIL's antialiased bilinear). The torchvision half is
// train/data/image_folder_peer.py, run with /usr/bin/python3; without PIL,
// torch or torchvision there the test skips, saying so.
//
// Tolerance: PNG samples must agree bit for bit. JPEG samples must agree
// within 2 levels (2/255 before Normalize): exact when PIL uses the same
// libjpeg-turbo as tandem (Debian's libjpeg62-turbo, as here), close when a
// PIL wheel brings its own build. The largest difference seen is printed.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "train/data/image_folder.h"
#include "train/data/image_testing.h"

namespace tandem::train {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

// One image of each PNG mode, a greyscale JPEG and an odd-sized colour JPEG
// under root/x_modes.
void WriteModes(const std::string& root) {
  auto pattern = [](int w, int h, int channels) {
    std::vector<uint8_t> out;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < channels; ++c) {
          out.push_back(static_cast<uint8_t>(
              (x * 29 + y * 13 + c * 71 + ((x ^ y) & 7) * 9) % 256));
        }
      }
    }
    return out;
  };
  const std::string dir = root + "/x_modes/";
  auto put = [&](const std::string& name, const std::string& bytes) {
    ASSERT_TRUE(testing::WriteFile(dir + name, bytes).ok()) << name;
  };
  put("a_rgba.png", *testing::EncodePng({.width = 45,
                                         .height = 37,
                                         .color_type = 6,
                                         .samples = pattern(45, 37, 4)}));
  put("b_grey_alpha16.png",
      *testing::EncodePng({.width = 33,
                           .height = 29,
                           .color_type = 4,
                           .bit_depth = 16,
                           .samples = pattern(33, 29, 4)}));
  testing::PngSpec palette{.width = 30, .height = 41, .color_type = 3};
  palette.samples = pattern(30, 41, 1);
  for (uint8_t& s : palette.samples) s %= 200;
  palette.palette = pattern(200, 1, 3);
  palette.trns = std::vector<uint8_t>(50, 128);
  put("c_palette.png", *testing::EncodePng(palette));
  std::vector<uint8_t> two_bit = pattern(40, 40, 1);
  std::vector<uint8_t> packed(10 * 40);
  for (int i = 0; i < 40 * 40; ++i) {
    packed[i / 4] |=
        static_cast<uint8_t>((two_bit[i] & 3) << (6 - 2 * (i % 4)));
  }
  put("d_grey2.png", *testing::EncodePng({.width = 40,
                                          .height = 40,
                                          .color_type = 0,
                                          .bit_depth = 2,
                                          .samples = packed}));
  put("e_interlaced.png", *testing::EncodePng({.width = 35,
                                               .height = 35,
                                               .color_type = 2,
                                               .interlaced = true,
                                               .samples = pattern(35, 35, 3)}));
  put("f_grey.jpg", *testing::EncodeJpeg(37, 45, 1, pattern(37, 45, 1), 85));
  put("g_odd.jpeg", *testing::EncodeJpeg(47, 31, 3, pattern(47, 31, 3), 75));
}

class ImageFolderPeerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(std::string(std::getenv("TEST_TMPDIR")) +
                            "/peer_folder");
    std::filesystem::remove_all(*root_);
    ASSERT_TRUE(
        testing::WriteDigitsFolder(*root_, "train/data/digits.csv.gz", 6).ok());
    WriteModes(*root_);
  }
  static std::string* root_;
};
std::string* ImageFolderPeerTest::root_ = nullptr;

struct Pipeline {
  const char* name;
  ImageTransform transform;
};

void Compare(const std::string& root, const Pipeline& p) {
  const std::string out =
      std::string(std::getenv("TEST_TMPDIR")) + "/torch_" + p.name;
  const std::string command =
      "/usr/bin/python3 train/data/image_folder_peer.py '" + root + "' " +
      p.name + " '" + out + "'";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw)) << command;
  if (WEXITSTATUS(raw) == 77) {
    GTEST_SKIP() << "PIL, torch or torchvision is missing for /usr/bin/python3 "
                    "(see the line above); not compared";
  }
  ASSERT_EQ(WEXITSTATUS(raw), 0) << command;

  auto data = ImageFolderDataset::Create(root, {.transform = p.transform});
  ASSERT_TRUE(data.ok()) << data.status();
  // (b) The listing: same order, same paths, same labels.
  const std::vector<std::string> lines =
      absl::StrSplit(ReadAll(out + ".txt"), '\n', absl::SkipEmpty());
  ASSERT_EQ(static_cast<int64_t>(lines.size()), (*data)->size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& entry = (*data)->samples()[i];
    EXPECT_EQ(lines[i], absl::StrCat(entry.path.substr(root.size() + 1), "\t",
                                     entry.label))
        << "sample " << i;
  }
  // (a) The tensors, sample by sample, seeded as the script seeds them.
  const std::string blob = ReadAll(out + ".bin");
  const float min_std = p.transform.std.empty() ? 1.0f : 0.224f;
  size_t offset = 0;
  double worst_jpeg = 0;
  int64_t exact_png = 0;
  for (int64_t i = 0; i < (*data)->size(); ++i) {
    const std::string& path = (*data)->samples()[i].path;
    SCOPED_TRACE(path);
    Generator gen(1000 + i);
    absl::StatusOr<Sample> sample = (*data)->Get(i, gen);
    ASSERT_TRUE(sample.ok()) << sample.status();
    const std::vector<float> ours = *sample->features.ToVector<float>();
    ASSERT_LE(offset + ours.size() * 4, blob.size());
    std::vector<float> theirs(ours.size());
    std::memcpy(theirs.data(), blob.data() + offset, ours.size() * 4);
    offset += ours.size() * 4;
    const bool jpeg = absl::EndsWithIgnoreCase(path, ".jpg") ||
                      absl::EndsWithIgnoreCase(path, ".jpeg");
    double worst = 0;
    for (size_t k = 0; k < ours.size(); ++k) {
      worst =
          std::max(worst, static_cast<double>(std::abs(ours[k] - theirs[k])));
    }
    if (jpeg) {
      worst_jpeg = std::max(worst_jpeg, worst);
      EXPECT_LE(worst, 2.0 / 255 / min_std + 1e-6);
    } else {
      EXPECT_EQ(ours, theirs);
      exact_png += ours == theirs;
    }
  }
  EXPECT_EQ(offset, blob.size());
  std::printf(
      "pipeline %s: %lld samples, %lld PNG bit for bit, largest JPEG "
      "difference %g (in levels: %g)\n",
      p.name, static_cast<long long>((*data)->size()),
      static_cast<long long>(exact_png), worst_jpeg,
      worst_jpeg * 255 * min_std);
}

const std::vector<float> kMean = {0.485f, 0.456f, 0.406f};
const std::vector<float> kStd = {0.229f, 0.224f, 0.225f};

TEST_F(ImageFolderPeerTest, ToTensorAlone) { Compare(*root_, {"plain", {}}); }

TEST_F(ImageFolderPeerTest, TrainingPipelineFromTheSeed) {
  Compare(*root_, {"train",
                   {.resize = 40,
                    .center_crop = 36,
                    .random_crop = 32,
                    .random_crop_padding = 4,
                    .random_horizontal_flip = true,
                    .mean = kMean,
                    .std = kStd}});
}

TEST_F(ImageFolderPeerTest, ShrinkingPipeline) {
  Compare(*root_,
          {"shrink",
           {.resize = 20, .center_crop = 18, .mean = kMean, .std = kStd}});
}

}  // namespace
}  // namespace tandem::train
