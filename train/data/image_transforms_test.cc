#include "train/data/image_transforms.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A 7x5 RGB image, pixel (x, y) channel c = (37 x + 11 y + 50 c) mod 256.
RgbImage Pattern(int width = 7, int height = 5) {
  RgbImage image{width, height, {}};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        image.pixels.push_back(
            static_cast<uint8_t>((x * 37 + y * 11 + c * 50) % 256));
      }
    }
  }
  return image;
}

// Pinned from PIL 9.4 (Debian python3-pil):
//   Image.fromarray(Pattern, "RGB").resize(size, Image.BILINEAR)
// shrinking (antialiased), growing, and one axis at a time.
TEST(ImageTransformsTest, ResizeIsPilBilinearBitForBit) {
  struct Case {
    int width, height;
    std::vector<uint8_t> expected;
  };
  const std::vector<Case> cases = {
      {3,
       2,
       {43, 93, 143, 122, 168, 166, 201, 130, 62, 65, 115, 165, 144, 180, 169,
        194, 77, 67}},
      {7, 3, {5,   55,  105, 42,  92,  142, 79,  129, 179, 116, 166, 216, 153,
              203, 143, 190, 240, 34,  227, 21,  71,  22,  72,  122, 59,  109,
              159, 96,  146, 196, 133, 183, 233, 170, 220, 14,  207, 58,  51,
              244, 38,  88,  39,  89,  139, 76,  126, 176, 113, 163, 213, 150,
              200, 250, 187, 237, 31,  224, 18,  68,  115, 55,  105}},
      {4, 5, {19, 69,  119, 77,  127, 177, 145, 195, 194, 203, 119, 59,
              30, 80,  130, 88,  138, 188, 156, 206, 72,  214, 130, 58,
              41, 91,  141, 99,  149, 199, 167, 166, 83,  225, 31,  69,
              52, 102, 152, 110, 160, 210, 178, 177, 94,  236, 42,  80,
              63, 113, 163, 121, 171, 221, 189, 188, 105, 113, 53,  91}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.width << "x" << c.height);
    const RgbImage out = ResizeBilinear(Pattern(), c.width, c.height);
    EXPECT_EQ(out.width, c.width);
    EXPECT_EQ(out.height, c.height);
    EXPECT_THAT(out.pixels, ElementsAreArray(c.expected));
  }
  // Growing to 11x8: the first row and the last pixel.
  const RgbImage big = ResizeBilinear(Pattern(), 11, 8);
  ASSERT_EQ(big.pixels.size(), 11u * 8 * 3);
  EXPECT_THAT(
      std::vector<uint8_t>(big.pixels.begin(), big.pixels.begin() + 33),
      ElementsAreArray({0,   50,  100, 17,  67,  117, 40,  90,  140, 64,  114,
                        164, 87,  137, 187, 111, 161, 211, 135, 185, 235, 158,
                        208, 188, 182, 232, 49,  205, 116, 49,  222, 16,  66}));
  EXPECT_THAT(std::vector<uint8_t>(big.pixels.end() - 3, big.pixels.end()),
              ElementsAreArray({10, 60, 110}));
  // The same size: unchanged.
  EXPECT_EQ(ResizeBilinear(Pattern(), 7, 5).pixels, Pattern().pixels);
}

TEST(ImageTransformsTest, ResizedSizeIsTorchvisionsShorterSideRule) {
  using Size = std::pair<int64_t, int64_t>;
  EXPECT_EQ(ResizedSize(640, 480, 256), Size(341, 256));
  EXPECT_EQ(ResizedSize(480, 640, 256), Size(256, 341));
  EXPECT_EQ(ResizedSize(500, 375, 256), Size(341, 256));
  EXPECT_EQ(ResizedSize(100, 100, 32), Size(32, 32));
  EXPECT_EQ(ResizedSize(3, 1000, 32), Size(32, 10666));
}

// round((n - size) / 2) with halves to even: 5 - 2 = 3 rows -> 2 (1.5 -> 2),
// 7 - 2 = 5 columns -> 2 (2.5 -> 2).
TEST(ImageTransformsTest, CenterCropRoundsHalvesToEvenAndPadsWithZero) {
  const RgbImage image = Pattern(7, 5);
  const RgbImage crop = CenterCropImage(image, 2);
  ASSERT_EQ(crop.width, 2);
  ASSERT_EQ(crop.height, 2);
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 2; ++x) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(crop.at(y, x, c), image.at(y + 2, x + 2, c));
      }
    }
  }
  // Larger than the image: (6 - 3) // 2 = 1 column of zeros on the left, 2
  // on the right; likewise rows.
  const RgbImage small = Pattern(3, 3);
  const RgbImage padded = CenterCropImage(small, 6);
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 6; ++x) {
      const bool inside = y >= 1 && y <= 3 && x >= 1 && x <= 3;
      EXPECT_EQ(padded.at(y, x, 1), inside ? small.at(y - 1, x - 1, 1) : 0)
          << y << "," << x;
    }
  }
}

// Draws pinned from PyTorch 1.13: torch.manual_seed(s); torch.randint(0, 9,
// (1,)); torch.randint(0, 9, (1,)); torch.rand(1):
//   s = 0: 8, 0, 0.0885 (flip);  s = 7: 0, 4, 0.659 (no flip).
// A 10x10 image padded by 1 is 12x12; a 4x4 crop has 9 offsets per axis.
TEST(ImageTransformsTest, RandomCropAndFlipDrawLikeTorchvision) {
  const RgbImage image = Pattern(10, 10);
  const ImageTransform t{.random_crop = 4,
                         .random_crop_padding = 1,
                         .random_horizontal_flip = true};
  ASSERT_TRUE(CheckImageTransform(t).ok());
  struct Case {
    uint64_t seed;
    int top, left;
    bool flip;
  };
  for (const Case& c : {Case{0, 8, 0, true}, Case{7, 0, 4, false}}) {
    SCOPED_TRACE(c.seed);
    Generator gen(c.seed);
    absl::StatusOr<Tensor> out = ApplyImageTransform(image, t, gen, "x.png");
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->shape(), (Shape{3, 4, 4}));
    const float* v = out->data<float>();
    for (int ch = 0; ch < 3; ++ch) {
      for (int y = 0; y < 4; ++y) {
        for (int x = 0; x < 4; ++x) {
          const int sx = c.left + (c.flip ? 3 - x : x) - 1;  // unpadded
          const int sy = c.top + y - 1;
          const bool inside = sx >= 0 && sx < 10 && sy >= 0 && sy < 10;
          const float want =
              inside ? static_cast<float>(image.at(sy, sx, ch)) / 255.0f : 0.f;
          EXPECT_EQ(v[(ch * 4 + y) * 4 + x], want) << ch << y << x;
        }
      }
    }
  }
}

TEST(ImageTransformsTest, NoCropDrawWhenTheImageIsExactlyTheCrop) {
  Generator gen(3);
  Generator fresh(3);
  const ImageTransform t{.random_crop = 10};
  absl::StatusOr<Tensor> out = ApplyImageTransform(Pattern(10, 10), t, gen, "");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(gen.Random(), fresh.Random());
}

TEST(ImageTransformsTest, ToTensorAndNormalizeInFloat32) {
  RgbImage image{2, 1, {255, 0, 51, 128, 64, 1}};
  const ImageTransform t{.mean = {0.5f, 0.25f, 0.1f},
                         .std = {0.25f, 0.5f, 0.2f}};
  Generator gen(0);
  absl::StatusOr<Tensor> out = ApplyImageTransform(image, t, gen, "");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->shape(), (Shape{3, 1, 2}));
  const std::vector<float> got = *out->ToVector<float>();
  // Channel-major: r of both pixels, then g, then b.
  const uint8_t bytes[3][2] = {{255, 128}, {0, 64}, {51, 1}};
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 2; ++i) {
      const float x = static_cast<float>(bytes[c][i]) / 255.0f;
      EXPECT_EQ(got[c * 2 + i], (x - t.mean[c]) / t.std[c]);
    }
  }
  EXPECT_EQ(got[0], 2.0f);  // (1 - 0.5) / 0.25
}

TEST(ImageTransformsTest, BadSettingsAndSizesFailNamingThem) {
  EXPECT_THAT(CheckImageTransform({.resize = -1}).message(),
              HasSubstr("resize = -1"));
  EXPECT_THAT(CheckImageTransform({.random_crop_padding = 4}).message(),
              HasSubstr("without random_crop"));
  EXPECT_THAT(CheckImageTransform({.mean = {0.5f}, .std = {0.5f}}).message(),
              HasSubstr("expected 3 each"));
  EXPECT_THAT(
      CheckImageTransform({.mean = {0, 0, 0}, .std = {1, 0, 1}}).message(),
      HasSubstr("channel 1"));
  Generator gen(0);
  absl::StatusOr<Tensor> out = ApplyImageTransform(
      Pattern(5, 5), {.random_crop = 8, .random_crop_padding = 1}, gen,
      "tiny.png");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("tiny.png"));
  EXPECT_THAT(out.status().message(), HasSubstr("larger than the image (7x7"));
  EXPECT_TRUE(ImageTransformShape({}).empty());
  EXPECT_EQ(ImageTransformShape({.resize = 40, .center_crop = 32}),
            (std::vector<int64_t>{3, 32, 32}));
}

}  // namespace
}  // namespace tandem::train
