#include "train/data/image_decode.h"

#include <png.h>
#include <zlib.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/data/image_testing.h"

namespace tandem::train {
namespace {

using testing::EncodeJpeg;
using testing::EncodePng;
using ::testing::HasSubstr;
using testing::PngSpec;

// RGB triples from grey levels.
std::vector<uint8_t> Grey(const std::vector<uint8_t>& levels) {
  std::vector<uint8_t> out;
  for (uint8_t g : levels) out.insert(out.end(), 3, g);
  return out;
}

RgbImage DecodeOrDie(const std::string& bytes) {
  absl::StatusOr<RgbImage> image = DecodeRgbImage(bytes, "test.png");
  EXPECT_TRUE(image.ok()) << image.status();
  return image.ok() ? *image : RgbImage{};
}

// Each PNG mode decodes to exactly what PIL's convert("RGB") gives: grey
// replicated (low depths scaled by bit repetition), palette looked up, alpha
// dropped, 16-bit to its high byte.
TEST(ImageDecodeTest, EveryPngModeDecodesExactly) {
  struct Case {
    const char* what;
    PngSpec spec;
    std::vector<uint8_t> expected;
  };
  const std::vector<Case> cases = {
      {"grey 8-bit",
       {.width = 3, .height = 1, .color_type = 0, .samples = {0, 7, 255}},
       Grey({0, 7, 255})},
      {"grey 1-bit",
       {.width = 3,
        .height = 1,
        .color_type = 0,
        .bit_depth = 1,
        .samples = {0b10100000}},
       Grey({255, 0, 255})},
      {"grey 2-bit",
       {.width = 4,
        .height = 1,
        .color_type = 0,
        .bit_depth = 2,
        .samples = {0b00011011}},
       Grey({0, 0x55, 0xaa, 0xff})},
      {"grey 4-bit",
       {.width = 2,
        .height = 1,
        .color_type = 0,
        .bit_depth = 4,
        .samples = {0x1f}},
       Grey({0x11, 0xff})},
      {"grey + alpha",
       {.width = 2, .height = 1, .color_type = 4, .samples = {9, 0, 200, 255}},
       Grey({9, 200})},
      {"RGB",
       {.width = 2,
        .height = 1,
        .color_type = 2,
        .samples = {1, 2, 3, 250, 251, 252}},
       {1, 2, 3, 250, 251, 252}},
      {"RGBA (alpha dropped, not composited)",
       {.width = 2,
        .height = 1,
        .color_type = 6,
        .samples = {10, 20, 30, 0, 40, 50, 60, 128}},
       {10, 20, 30, 40, 50, 60}},
      {"palette with tRNS",
       {.width = 3,
        .height = 1,
        .color_type = 3,
        .samples = {2, 0, 1},
        .palette = {5, 6, 7, 50, 60, 70, 200, 100, 0},
        .trns = {0, 128, 255}},
       {200, 100, 0, 5, 6, 7, 50, 60, 70}},
      {"palette 2-bit",
       {.width = 3,
        .height = 1,
        .color_type = 3,
        .bit_depth = 2,
        .samples = {0b10000100},
        .palette = {5, 6, 7, 50, 60, 70, 200, 100, 0}},
       {200, 100, 0, 5, 6, 7, 50, 60, 70}},
      {"RGB 16-bit (high bytes)",
       {.width = 1,
        .height = 1,
        .color_type = 2,
        .bit_depth = 16,
        .samples = {0x12, 0xff, 0x34, 0x00, 0xfe, 0x80}},
       {0x12, 0x34, 0xfe}},
      {"grey + alpha 16-bit (high byte)",
       {.width = 1,
        .height = 1,
        .color_type = 4,
        .bit_depth = 16,
        .samples = {0xab, 0xcd, 0x00, 0x01}},
       Grey({0xab})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::string> bytes = EncodePng(c.spec);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const RgbImage image = DecodeOrDie(*bytes);
    EXPECT_EQ(image.width, c.spec.width);
    EXPECT_EQ(image.height, c.spec.height);
    EXPECT_EQ(image.pixels, c.expected);
  }
}

TEST(ImageDecodeTest, InterlacedPngDecodesExactly) {
  PngSpec spec{.width = 13, .height = 11, .color_type = 2, .interlaced = true};
  for (int i = 0; i < 13 * 11 * 3; ++i) {
    spec.samples.push_back(static_cast<uint8_t>(i * 37 + 11));
  }
  absl::StatusOr<std::string> bytes = EncodePng(spec);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(DecodeOrDie(*bytes).pixels, spec.samples);
}

// JPEG is lossy: a smooth image at quality 95 comes back within a few
// levels (the exact values are PIL's, checked by image_folder_peer_test).
TEST(ImageDecodeTest, JpegDecodesCloseToTheEncodedPixels) {
  for (int components : {1, 3}) {
    SCOPED_TRACE(components);
    std::vector<uint8_t> pixels;
    for (int y = 0; y < 24; ++y) {
      for (int x = 0; x < 40; ++x) {
        for (int c = 0; c < components; ++c) {
          pixels.push_back(static_cast<uint8_t>(20 + 3 * x + 2 * y + 30 * c));
        }
      }
    }
    absl::StatusOr<std::string> bytes =
        EncodeJpeg(40, 24, components, pixels, 95);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<RgbImage> image = DecodeRgbImage(*bytes, "smooth.jpg");
    ASSERT_TRUE(image.ok()) << image.status();
    ASSERT_EQ(image->width, 40);
    ASSERT_EQ(image->height, 24);
    int worst = 0;
    for (int i = 0; i < 40 * 24; ++i) {
      for (int c = 0; c < 3; ++c) {
        const int want = pixels[i * components + (components == 1 ? 0 : c)];
        worst = std::max(worst, std::abs(image->pixels[i * 3 + c] - want));
      }
      if (components == 1) {  // r = g = b
        EXPECT_EQ(image->pixels[i * 3], image->pixels[i * 3 + 1]);
        EXPECT_EQ(image->pixels[i * 3], image->pixels[i * 3 + 2]);
      }
    }
    EXPECT_LE(worst, 4);
  }
}

std::string GoodPng() {
  return *EncodePng({.width = 4,
                     .height = 4,
                     .color_type = 2,
                     .samples = std::vector<uint8_t>(48, 77)});
}

// A PNG chunk with its CRC.
std::string Chunk(const std::string& type, const std::string& data) {
  std::string out;
  const uint32_t n = static_cast<uint32_t>(data.size());
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>(n >> s));
  out += type + data;
  const std::string crc_input = type + data;
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(crc_input.data()),
            static_cast<uInt>(crc_input.size())));
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>(crc >> s));
  return out;
}

std::string BigEndian(uint32_t v) {
  std::string out;
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>(v >> s));
  return out;
}

// Each bad file fails naming the file and the reason, with the status code
// that says whether to fix the file (DataLoss: truncated or corrupt) or
// convert it (InvalidArgument); a good file decodes after every failure.
TEST(ImageDecodeTest, BadFilesFailNamingTheFileAndTheReason) {
  const std::string png = GoodPng();
  std::string corrupt = png;
  corrupt[corrupt.size() / 2 + 10] ^= 0x5a;  // inside IDAT: a CRC error
  std::vector<uint8_t> grey16(2 * 2 * 2, 0x10);
  std::vector<uint8_t> cmyk(8 * 8 * 4, 100);
  const std::string jpeg =
      *EncodeJpeg(8, 8, 3, std::vector<uint8_t>(192, 9), 90);
  const std::string bomb =
      std::string("\x89PNG\r\n\x1a\n", 8) +
      Chunk("IHDR", BigEndian(20000) + BigEndian(20000) +
                        std::string("\x08\x02\x00\x00\x00", 5)) +
      Chunk("IDAT", "");
  struct Case {
    const char* name;
    std::string bytes;
    absl::StatusCode code;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"notes.png", "this is text, not an image\n",
       absl::StatusCode::kInvalidArgument, "not an image (its first bytes are"},
      {"empty.png", "", absl::StatusCode::kInvalidArgument, "an empty file"},
      {"anim.png", "GIF89a\x01\x00", absl::StatusCode::kInvalidArgument,
       "a GIF image"},
      {"cut.png", png.substr(0, png.size() / 2), absl::StatusCode::kDataLoss,
       "truncated"},
      {"cut.jpg", jpeg.substr(0, jpeg.size() / 2), absl::StatusCode::kDataLoss,
       "truncated"},
      {"bad.png", corrupt, absl::StatusCode::kDataLoss, "corrupt"},
      {"deep.png",
       *EncodePng({.width = 2,
                   .height = 2,
                   .color_type = 0,
                   .bit_depth = 16,
                   .samples = grey16}),
       absl::StatusCode::kInvalidArgument, "16-bit greyscale PNG"},
      {"print.jpg", *EncodeJpeg(8, 8, 4, cmyk, 90),
       absl::StatusCode::kInvalidArgument, "CMYK JPEG"},
      {"bomb.png", bomb, absl::StatusCode::kInvalidArgument,
       "DecompressionBombError"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<RgbImage> image = DecodeRgbImage(c.bytes, c.name);
    ASSERT_FALSE(image.ok());
    EXPECT_EQ(image.status().code(), c.code) << image.status();
    EXPECT_THAT(image.status().message(), HasSubstr(c.name));
    EXPECT_THAT(image.status().message(), HasSubstr(c.reason));
    EXPECT_EQ(DecodeOrDie(png).pixels, std::vector<uint8_t>(48, 77));
  }
}

TEST(ImageDecodeTest, MissingFileIsNotFoundNamingIt) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/no/such/image.png";
  absl::StatusOr<RgbImage> image = LoadRgbImage(path);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(image.status().message(), HasSubstr(path));
  EXPECT_THAT(image.status().message(), HasSubstr("No such file"));
}

TEST(ImageDecodeTest, LoadReadsTheFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/ok.png";
  ASSERT_TRUE(testing::WriteFile(path, GoodPng()).ok());
  absl::StatusOr<RgbImage> image = LoadRgbImage(path);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->pixels, std::vector<uint8_t>(48, 77));
}

}  // namespace
}  // namespace tandem::train
