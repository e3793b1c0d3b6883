// Test helpers for image folders: PNG and JPEG encoders (libpng,
// libjpeg-turbo) and a small image folder of the digits data set rendered to
// 32x32 images. testonly.
#ifndef TANDEM_TRAIN_DATA_IMAGE_TESTING_H_
#define TANDEM_TRAIN_DATA_IMAGE_TESTING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/data/image_decode.h"

namespace tandem::train::testing {

struct PngSpec {
  int width = 0;
  int height = 0;
  int color_type = 2;  // libpng's PNG_COLOR_TYPE_*: 0 grey, 2 RGB, 3 palette,
                       // 4 grey + alpha, 6 RGBA
  int bit_depth = 8;   // 1, 2, 4, 8 or 16 as the colour type allows
  bool interlaced = false;  // Adam7
  // Rows of samples as libpng takes them: packed below 8 bits, big-endian
  // 16-bit.
  std::vector<uint8_t> samples = {};
  std::vector<uint8_t> palette = {};  // r g b triples (colour type 3)
  std::vector<uint8_t> trns = {};     // palette alphas (colour type 3)
};

// The PNG file's bytes; an error names libpng's message.
absl::StatusOr<std::string> EncodePng(const PngSpec& spec);

// A baseline JPEG of `pixels` (components 1: grey, 3: RGB in, YCbCr in the
// file; 4: CMYK), 4:2:0 chroma subsampling for RGB (libjpeg's default).
absl::StatusOr<std::string> EncodeJpeg(int width, int height, int components,
                                       const std::vector<uint8_t>& pixels,
                                       int quality);

absl::Status WriteFile(const std::string& path, const std::string& bytes);

// An RGB PNG of `image`, lossless.
absl::StatusOr<std::string> EncodeRgbPng(const RgbImage& image);

struct DigitsFolder {
  std::string root;
  int64_t images = 0;
  // Each PNG written, relative path and the pixels it holds (lossless).
  std::vector<std::pair<std::string, RgbImage>> png;
  // Each JPEG written, relative path and the pixels given to the encoder.
  std::vector<std::pair<std::string, RgbImage>> jpeg;
};

// The first `per_class` digits of each class in train/data/digits.csv.gz
// (8x8, values 0..16), each scaled 4x to 32x32 (v * 255 / 16, rounded) and
// tinted per class, written under root/<digit>/ : alternately as an RGB
// PNG, a greyscale PNG, a JPEG (quality 90) and a palette PNG, with names
// that exercise torchvision's ordering (mixed-case extensions, a sub-folder
// in class 3, a text file it skips). `csv_path` is the digits file.
absl::StatusOr<DigitsFolder> WriteDigitsFolder(const std::string& root,
                                               const std::string& csv_path,
                                               int per_class);

}  // namespace tandem::train::testing

#endif  // TANDEM_TRAIN_DATA_IMAGE_TESTING_H_
