// tandem::nn::Conv2d — 2-d convolution over NCHW input, after torch.nn.Conv2d
// (groups = 1, dilation = 1, zero padding).
//
//   tandem::Generator gen(5);
//   TANDEM_ASSIGN_OR_RETURN(auto conv, tandem::nn::Conv2d::Create(
//       /*in_channels=*/3, /*out_channels=*/16, /*kernel_size=*/3,
//       /*stride=*/1, /*padding=*/1, gen));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor y, conv->Forward(x));
//   // x [N, 3, H, W] -> y [N, 16, H, W]
//
// Parameters, in this order: "weight" [out_channels, in_channels, kh, kw],
// then "bias" [out_channels] (absent with Options::bias = false).
// Initialised like PyTorch's reset_parameters(): kaiming_uniform_(a =
// sqrt(5)) with fan_in = in_channels * kh * kw, then the bias uniform in
// +-1/sqrt(fan_in), both drawn from `gen`: bit-identical to PyTorch after the
// same seed.
#ifndef TANDEM_TENSOR_NN_LAYERS_CONV2D_H_
#define TANDEM_TENSOR_NN_LAYERS_CONV2D_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class Conv2d : public Module {
 public:
  struct Options {
    bool bias = true;
    DType dtype = DType::kF32;  // f32 or f64
  };

  // Square kernel, stride and padding. Errors: channels < 1, kernel or
  // stride < 1, padding < 0, dtype not f32/f64, allocation failure.
  static absl::StatusOr<std::unique_ptr<Conv2d>> Create(
      int64_t in_channels, int64_t out_channels, int64_t kernel_size,
      int64_t stride, int64_t padding, Generator& gen);
  // (h, w) pairs.
  static absl::StatusOr<std::unique_ptr<Conv2d>> Create(
      int64_t in_channels, int64_t out_channels,
      std::array<int64_t, 2> kernel_size, std::array<int64_t, 2> stride,
      std::array<int64_t, 2> padding, Generator& gen, const Options& options);

  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Conv2d"; }
  std::string ExtraRepr() const override;

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const std::array<int64_t, 2>& kernel_size() const { return kernel_size_; }
  const std::array<int64_t, 2>& stride() const { return conv_.stride; }
  const std::array<int64_t, 2>& padding() const { return conv_.padding; }
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  Conv2d(int64_t in_channels, int64_t out_channels,
         std::array<int64_t, 2> kernel_size, Conv2dOptions conv)
      : in_channels_(in_channels),
        out_channels_(out_channels),
        kernel_size_(kernel_size),
        conv_(conv) {}

  int64_t in_channels_;
  int64_t out_channels_;
  std::array<int64_t, 2> kernel_size_;
  Conv2dOptions conv_;  // tandem::Conv2dOptions (tensor/ops.h)
  Tensor weight_;
  Tensor bias_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_CONV2D_H_
