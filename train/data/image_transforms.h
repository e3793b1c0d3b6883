// The image transforms of a torchvision training or evaluation pipeline, on
// 8-bit RGB images (train/data/image_decode.h), each reproducing
// torchvision 0.14 on a PIL image (Debian's python3-torchvision, PIL 9.4)
// bit for bit:
//
//   ImageTransform t{.resize = 36, .center_crop = 32, .random_crop = 32,
//                    .random_crop_padding = 4, .random_horizontal_flip = true,
//                    .mean = {0.485f, 0.456f, 0.406f},
//                    .std = {0.229f, 0.224f, 0.225f}};
//   TANDEM_RETURN_IF_ERROR(CheckImageTransform(t));
//   TANDEM_ASSIGN_OR_RETURN(Tensor x, ApplyImageTransform(image, t, gen,
//   name));
//   // x: [3, 32, 32] float32
//
// ApplyImageTransform runs, in this order, the steps that are switched on:
//   Resize(resize)            the shorter side becomes `resize`, the longer
//                             int(resize * long / short); bilinear exactly
//                             as PIL's Image.resize(BILINEAR), which
//                             antialiases when shrinking (a triangle filter
//                             widened by the scale; 22-bit fixed-point
//                             weights; horizontal then vertical pass, each
//                             rounded to 8 bits). Bit-exact: its arithmetic
//                             is PIL's, in the same order (built with
//                             -ffp-contract=off so no multiply-add is fused
//                             where PIL's does not). Not torchvision's tensor
//                             resize (antialias=False), which differs.
//   CenterCrop(center_crop)   a centred square, offsets round((H - h) / 2)
//                             with Python's round (half to even); an image
//                             smaller than the crop is padded with 0 first
//   RandomCrop(random_crop,   pad every side by `padding` with 0, then a
//     padding)                square at i = randint(0, H - h + 1),
//                             j = randint(0, W - w + 1) (no draw when the
//                             image is exactly the crop's size)
//   RandomHorizontalFlip()    mirrored when rand(1) < 0.5
//   ToTensor()                [3, H, W] float32, each byte v as v / 255.f
//   Normalize(mean, std)      (x - mean[c]) / std[c] in float32
// The draws come from `gen` in this order, each one Mersenne Twister output
// as torch.randint and torch.rand use it, so Generator(s) gives what
// torch.manual_seed(s) followed by the torchvision Compose gives (checked
// against PIL and torchvision by image_folder_peer_test).
// Thread-safety: pure functions; `gen` is the caller's.
#ifndef TANDEM_TRAIN_DATA_IMAGE_TRANSFORMS_H_
#define TANDEM_TRAIN_DATA_IMAGE_TRANSFORMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/data/image_decode.h"

namespace tandem::train {

struct ImageTransform {
  int64_t resize = 0;       // 0: no Resize
  int64_t center_crop = 0;  // 0: no CenterCrop
  int64_t random_crop = 0;  // 0: no RandomCrop
  int64_t random_crop_padding = 0;
  bool random_horizontal_flip = false;
  // Both empty (no Normalize) or both 3 values, std all > 0.
  std::vector<float> mean = {};
  std::vector<float> std = {};
};

// The sizes are >= 0, padding >= 0 only with a random crop, mean and std as
// above; the error names the field and its value.
absl::Status CheckImageTransform(const ImageTransform& transform);

// [3, H, W] when the transform's output has a fixed size (a crop is on),
// otherwise empty.
std::vector<int64_t> ImageTransformShape(const ImageTransform& transform);

// The transform on one image; `name` (its file) labels errors. A random
// crop larger than the padded image is an error naming both sizes (as
// torchvision's "Required crop size ... is larger than input image size").
absl::StatusOr<Tensor> ApplyImageTransform(RgbImage image,
                                           const ImageTransform& transform,
                                           Generator& gen,
                                           absl::string_view name);

// The steps on their own, for tests and other pipelines.
// torchvision's Resize(int) output size: (width, height).
std::pair<int64_t, int64_t> ResizedSize(int64_t width, int64_t height,
                                        int64_t shorter_side);
// PIL's Image.resize((width, height), BILINEAR) on an RGB image; an image of
// that size already is returned unchanged. width, height >= 1.
RgbImage ResizeBilinear(const RgbImage& image, int64_t width, int64_t height);
// Pixels [top, top + height) x [left, left + width); outside the image: 0.
RgbImage CropImage(const RgbImage& image, int64_t top, int64_t left,
                   int64_t height, int64_t width);
// torchvision's center_crop (pads with 0 when the image is smaller).
RgbImage CenterCropImage(const RgbImage& image, int64_t size);
void FlipHorizontally(RgbImage& image);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_IMAGE_TRANSFORMS_H_
