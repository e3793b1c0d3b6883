#include "tensor/nn/layers/conv2d.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/nn/init.h"
#include "tensor/ops.h"

namespace tandem::nn {
namespace {

std::string Pair(const std::array<int64_t, 2>& p) {
  return absl::StrCat("(", p[0], ", ", p[1], ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<Conv2d>> Conv2d::Create(
    int64_t in_channels, int64_t out_channels, int64_t kernel_size,
    int64_t stride, int64_t padding, Generator& gen) {
  return Create(in_channels, out_channels, {kernel_size, kernel_size},
                {stride, stride}, {padding, padding}, gen, Options());
}

absl::StatusOr<std::unique_ptr<Conv2d>> Conv2d::Create(
    int64_t in_channels, int64_t out_channels,
    std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
    std::array<int64_t, 2> padding, Generator& gen, const Options& options) {
  if (in_channels < 1 || out_channels < 1 || kernel_size[0] < 1 ||
      kernel_size[1] < 1 || stride[0] < 1 || stride[1] < 1 || padding[0] < 0 ||
      padding[1] < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::Conv2d: expected in_channels, out_channels, kernel_size and "
        "stride >= 1 and padding >= 0, got in_channels=",
        in_channels, ", out_channels=", out_channels,
        ", kernel_size=", Pair(kernel_size), ", stride=", Pair(stride),
        ", padding=", Pair(padding)));
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::Conv2d: dtype must be f32 or f64, got ",
                     std::string(DTypeName(options.dtype))));
  }
  Conv2dOptions conv;
  conv.stride = stride;
  conv.padding = padding;
  std::unique_ptr<Conv2d> layer(
      new Conv2d(in_channels, out_channels, kernel_size, conv));
  TANDEM_ASSIGN_OR_RETURN(
      layer->weight_,
      Tensor::Empty({out_channels, in_channels, kernel_size[0], kernel_size[1]},
                    options.dtype));
  TANDEM_RETURN_IF_ERROR(
      init::KaimingUniform(layer->weight_, std::sqrt(5.0), gen));
  TANDEM_RETURN_IF_ERROR(layer->RegisterParameter("weight", layer->weight_));
  if (options.bias) {
    const int64_t fan_in = in_channels * kernel_size[0] * kernel_size[1];
    TANDEM_ASSIGN_OR_RETURN(layer->bias_,
                            Tensor::Empty({out_channels}, options.dtype));
    const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
    TANDEM_RETURN_IF_ERROR(init::Uniform(layer->bias_, -bound, bound, gen));
    TANDEM_RETURN_IF_ERROR(layer->RegisterParameter("bias", layer->bias_));
  }
  return layer;
}

absl::StatusOr<Tensor> Conv2d::Forward(const Tensor& input) {
  if (!input.defined() || input.ndim() != 4 || input.dim(1) != in_channels_) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::Conv2d(", ExtraRepr(), "): expected input [N, ",
                     in_channels_, ", H, W], got ",
                     input.defined() ? ShapeToString(input.shape())
                                     : "an undefined tensor"));
  }
  return tandem::Conv2d(input, weight_, bias_, conv_);
}

std::string Conv2d::ExtraRepr() const {
  std::string s = absl::StrCat(in_channels_, ", ", out_channels_,
                               ", kernel_size=", Pair(kernel_size_),
                               ", stride=", Pair(conv_.stride));
  if (conv_.padding[0] != 0 || conv_.padding[1] != 0) {
    absl::StrAppend(&s, ", padding=", Pair(conv_.padding));
  }
  if (!bias_.defined()) absl::StrAppend(&s, ", bias=False");
  return s;
}

}  // namespace tandem::nn
