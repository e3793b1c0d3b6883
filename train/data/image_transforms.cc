#include "train/data/image_transforms.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

// PIL's fixed point for 8-bit resampling: 32 bits less 8 for the value and
// 2 for overshoot.
constexpr int kPrecisionBits = 32 - 8 - 2;

// One output pixel's taps along one axis: input pixels [first, first + count)
// with weights[0, count).
struct Taps {
  int ksize = 0;             // weights per output pixel (the widest count)
  std::vector<int> first;    // per output pixel
  std::vector<int> count;    // per output pixel
  std::vector<int> weights;  // out_size * ksize, fixed point
};

double Triangle(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// PIL's precompute_coeffs for the box [0, in_size) and the bilinear filter,
// then its normalize_coeffs_8bpc: the same double arithmetic in the same
// order, so the fixed-point weights are PIL's bit for bit.
Taps BilinearTaps(int in_size, int out_size) {
  const float in0 = 0.0f;
  const float in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 1.0 * filterscale;  // bilinear: support 1
  Taps taps;
  taps.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(out_size);
  taps.count.resize(out_size);
  taps.weights.assign(static_cast<size_t>(out_size) * taps.ksize, 0);
  std::vector<double> k(taps.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double w = Triangle((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    int* out = &taps.weights[static_cast<size_t>(xx) * taps.ksize];
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[x] /= ww;
      out[x] = k[x] < 0 ? static_cast<int>(-0.5 + k[x] * (1 << kPrecisionBits))
                        : static_cast<int>(0.5 + k[x] * (1 << kPrecisionBits));
    }
    taps.first[xx] = xmin;
    taps.count[xx] = xmax;
  }
  return taps;
}

uint8_t Clip8(int sum) {
  // An arithmetic shift (C++20), as PIL's clip8 table lookup does.
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// One pass along x (stride 3 between taps) or along y (stride 3 * width).
RgbImage ResampleWidth(const RgbImage& in, int width) {
  const Taps taps = BilinearTaps(static_cast<int>(in.width), width);
  RgbImage out;
  out.width = width;
  out.height = in.height;
  out.pixels.resize(static_cast<size_t>(out.width * out.height * 3));
  for (int64_t y = 0; y < in.height; ++y) {
    const uint8_t* row = &in.pixels[static_cast<size_t>(y * in.width * 3)];
    uint8_t* dst = &out.pixels[static_cast<size_t>(y * width * 3)];
    for (int xx = 0; xx < width; ++xx) {
      const int* k = &taps.weights[static_cast<size_t>(xx) * taps.ksize];
      const uint8_t* src = row + taps.first[xx] * 3;
      for (int c = 0; c < 3; ++c) {
        int sum = 1 << (kPrecisionBits - 1);
        for (int x = 0; x < taps.count[xx]; ++x) sum += src[x * 3 + c] * k[x];
        dst[xx * 3 + c] = Clip8(sum);
      }
    }
  }
  return out;
}

RgbImage ResampleHeight(const RgbImage& in, int height) {
  const Taps taps = BilinearTaps(static_cast<int>(in.height), height);
  RgbImage out;
  out.width = in.width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(out.width * out.height * 3));
  const int64_t stride = in.width * 3;
  for (int yy = 0; yy < height; ++yy) {
    const int* k = &taps.weights[static_cast<size_t>(yy) * taps.ksize];
    const uint8_t* src =
        &in.pixels[static_cast<size_t>(taps.first[yy] * stride)];
    uint8_t* dst = &out.pixels[static_cast<size_t>(yy * stride)];
    for (int64_t i = 0; i < stride; ++i) {
      int sum = 1 << (kPrecisionBits - 1);
      for (int y = 0; y < taps.count[yy]; ++y)
        sum += src[y * stride + i] * k[y];
      dst[i] = Clip8(sum);
    }
  }
  return out;
}

// Python's round(d / 2) for an integer d >= 0: halves go to the even
// neighbour.
int64_t HalfRoundedEven(int64_t d) {
  const int64_t k = d / 2;
  if (d % 2 == 0) return k;
  return k % 2 == 0 ? k : k + 1;
}

// torch.randint(0, n, (1,)) for 1 <= n < 2^32: one output modulo n.
int64_t RandInt(Generator& gen, int64_t n) {
  return static_cast<int64_t>(gen.Random() % static_cast<uint64_t>(n));
}

}  // namespace

absl::Status CheckImageTransform(const ImageTransform& t) {
  // Sides beyond PIL's pixel limit cannot come out of a decoded image.
  constexpr int64_t kMaxSide = 1 << 20;
  const std::pair<const char*, int64_t> sizes[] = {
      {"resize", t.resize},
      {"center_crop", t.center_crop},
      {"random_crop", t.random_crop},
      {"random_crop_padding", t.random_crop_padding}};
  for (const auto& [field, value] : sizes) {
    if (value < 0 || value > kMaxSide) {
      return absl::InvalidArgumentError(
          absl::StrCat("ImageTransform: ", field, " = ", value,
                       "; expected 0 (off) to ", kMaxSide));
    }
  }
  if (t.random_crop_padding > 0 && t.random_crop == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImageTransform: random_crop_padding = ", t.random_crop_padding,
        " without random_crop; set random_crop to the output size"));
  }
  if (t.mean.size() != t.std.size() ||
      (!t.mean.empty() && t.mean.size() != 3)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ImageTransform: mean has ", t.mean.size(), " values and std ",
        t.std.size(), "; expected 3 each (r, g, b), or none for no Normalize"));
  }
  for (size_t c = 0; c < t.std.size(); ++c) {
    if (!(t.std[c] > 0) || !std::isfinite(t.std[c]) ||
        !std::isfinite(t.mean[c])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ImageTransform: channel ", c, " has mean ", t.mean[c], " and std ",
          t.std[c], "; expected finite values and std > 0"));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> ImageTransformShape(const ImageTransform& t) {
  const int64_t side = t.random_crop > 0 ? t.random_crop : t.center_crop;
  if (side == 0) return {};
  return {3, side, side};
}

std::pair<int64_t, int64_t> ResizedSize(int64_t width, int64_t height,
                                        int64_t shorter_side) {
  const bool width_shorter = width <= height;
  const int64_t shorter = width_shorter ? width : height;
  const int64_t longer = width_shorter ? height : width;
  // Python's int(size * long / short): a double quotient, truncated.
  const auto new_longer = static_cast<int64_t>(
      static_cast<double>(shorter_side * longer) / shorter);
  return width_shorter ? std::make_pair(shorter_side, new_longer)
                       : std::make_pair(new_longer, shorter_side);
}

RgbImage ResizeBilinear(const RgbImage& image, int64_t width, int64_t height) {
  RgbImage out = image;
  if (width != image.width) out = ResampleWidth(out, static_cast<int>(width));
  if (height != image.height) {
    out = ResampleHeight(out, static_cast<int>(height));
  }
  return out;
}

RgbImage CropImage(const RgbImage& image, int64_t top, int64_t left,
                   int64_t height, int64_t width) {
  RgbImage out;
  out.width = width;
  out.height = height;
  out.pixels.assign(static_cast<size_t>(width * height * 3), 0);
  const int64_t x0 = std::max<int64_t>(left, 0);
  const int64_t x1 = std::min(left + width, image.width);
  if (x1 <= x0) return out;
  for (int64_t y = std::max<int64_t>(top, 0);
       y < std::min(top + height, image.height); ++y) {
    std::memcpy(
        &out.pixels[static_cast<size_t>(((y - top) * width + (x0 - left)) * 3)],
        &image.pixels[static_cast<size_t>((y * image.width + x0) * 3)],
        static_cast<size_t>((x1 - x0) * 3));
  }
  return out;
}

RgbImage CenterCropImage(const RgbImage& image, int64_t size) {
  // Per axis: padded on the left/top by (size - n) // 2 when the crop is
  // larger, else offset round((n - size) / 2).
  auto offset = [size](int64_t n) {
    return size > n ? -((size - n) / 2) : HalfRoundedEven(n - size);
  };
  return CropImage(image, offset(image.height), offset(image.width), size,
                   size);
}

void FlipHorizontally(RgbImage& image) {
  for (int64_t y = 0; y < image.height; ++y) {
    uint8_t* row = &image.pixels[static_cast<size_t>(y * image.width * 3)];
    for (int64_t a = 0, b = image.width - 1; a < b; ++a, --b) {
      for (int c = 0; c < 3; ++c) std::swap(row[a * 3 + c], row[b * 3 + c]);
    }
  }
}

absl::StatusOr<Tensor> ApplyImageTransform(RgbImage image,
                                           const ImageTransform& t,
                                           Generator& gen,
                                           absl::string_view name) {
  if (t.resize > 0) {
    const auto [width, height] =
        ResizedSize(image.width, image.height, t.resize);
    if (width < 1 || height < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": resizing the ", image.width, "x", image.height,
          " image to a shorter side of ", t.resize, " gives ", width, "x",
          height, "; the image is too elongated for this resize"));
    }
    image = ResizeBilinear(image, width, height);
  }
  if (t.center_crop > 0) image = CenterCropImage(image, t.center_crop);
  if (t.random_crop > 0) {
    const int64_t p = t.random_crop_padding;
    const int64_t h = image.height + 2 * p;
    const int64_t w = image.width + 2 * p;
    const int64_t side = t.random_crop;
    if (h < side || w < side) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": random crop of ", side, "x", side,
          " is larger than the image (", h, "x", w, " after padding ", p,
          "); add a resize or center_crop before it, or more padding"));
    }
    int64_t top = 0;
    int64_t left = 0;
    if (h != side || w != side) {
      top = RandInt(gen, h - side + 1);
      left = RandInt(gen, w - side + 1);
    }
    image = CropImage(image, top - p, left - p, side, side);
  }
  if (t.random_horizontal_flip) {
    float u = 0;
    gen.Uniform(&u, 1, 0.0f, 1.0f);
    if (u < 0.5f) FlipHorizontally(image);
  }
  const int64_t plane = image.width * image.height;
  TANDEM_ASSIGN_OR_RETURN(
      Tensor out, Tensor::Empty({3, image.height, image.width}, DType::kF32));
  float* dst = out.data<float>();
  for (int c = 0; c < 3; ++c) {
    for (int64_t i = 0; i < plane; ++i) {
      float v =
          static_cast<float>(image.pixels[static_cast<size_t>(i * 3 + c)]) /
          255.0f;
      if (!t.mean.empty()) v = (v - t.mean[c]) / t.std[c];
      dst[c * plane + i] = v;
    }
  }
  return out;
}

}  // namespace tandem::train
