// Pooling layers and the residual connection, after torch.nn:
// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (each forwards to one op of
// tensor/ops.h; no parameters or state) and Residual, y = body(x) +
// shortcut(x), the skip connection of ResNet's blocks as a module a user can
// compose:
//
//   tandem::nn::Sequential body;
//   TANDEM_RETURN_IF_ERROR(body.Append(tandem::nn::Conv2d::Create(
//       64, 64, 3, 1, 1, gen)));
//   TANDEM_RETURN_IF_ERROR(body.Append(std::make_unique<tandem::nn::ReLU>()));
//   TANDEM_ASSIGN_OR_RETURN(auto block, tandem::nn::Residual::Create(
//       std::make_unique<tandem::nn::Sequential>(std::move(body))));
//   // block->Forward(x) == conv(x) -> relu, plus x
//
// The pools' arguments are checked by their ops when Forward runs (as in
// PyTorch, where a bad kernel fails at the call): the error names the op,
// the argument and the input's shape.
#ifndef TANDEM_TENSOR_NN_LAYERS_POOLING_H_
#define TANDEM_TENSOR_NN_LAYERS_POOLING_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensor/nn/module.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {

// nn.MaxPool2d(kernel_size, stride=None, padding=0): stride 0 means the
// kernel size. ExtraRepr prints a square size as one number, as PyTorch
// prints an int argument: "kernel_size=3, stride=2, padding=1, dilation=1,
// ceil_mode=False".
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0,
                     int64_t padding = 0)
      : MaxPool2d(MaxPool2dOptions{.kernel = {kernel_size, kernel_size},
                                   .stride = {stride, stride},
                                   .padding = {padding, padding}}) {}
  explicit MaxPool2d(const MaxPool2dOptions& options) : options_(options) {}
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "MaxPool2d"; }
  std::string ExtraRepr() const override;
  const MaxPool2dOptions& options() const { return options_; }

 private:
  MaxPool2dOptions options_;
};

// nn.AvgPool2d(kernel_size, stride=None, padding=0, ceil_mode=False,
// count_include_pad=True). ExtraRepr as PyTorch's: "kernel_size=3,
// stride=3, padding=0" (the two flags are not printed).
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0,
                     int64_t padding = 0)
      : AvgPool2d(AvgPool2dOptions{.kernel = {kernel_size, kernel_size},
                                   .stride = {stride, stride},
                                   .padding = {padding, padding}}) {}
  explicit AvgPool2d(const AvgPool2dOptions& options) : options_(options) {}
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "AvgPool2d"; }
  std::string ExtraRepr() const override;
  const AvgPool2dOptions& options() const { return options_; }

 private:
  AvgPool2dOptions options_;
};

// nn.AdaptiveAvgPool2d((oh, ow)); ExtraRepr "output_size=(1, 1)".
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size)
      : output_size_(output_size) {}
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string ExtraRepr() const override;
  const std::array<int64_t, 2>& output_size() const { return output_size_; }

 private:
  std::array<int64_t, 2> output_size_;
};

// y = body(x) + shortcut(x), shortcut the identity when absent. Children,
// in this order: "body", then "shortcut" (when given), so their parameters
// appear under "body.*" and "shortcut.*". The two branches must give the
// same shape (no broadcasting): a mismatch is InvalidArgument naming both.
// Gradients flow through both branches (the identity's is g itself).
class Residual : public Module {
 public:
  // Errors: a null body.
  static absl::StatusOr<std::unique_ptr<Residual>> Create(
      std::unique_ptr<Module> body, std::unique_ptr<Module> shortcut = nullptr);
  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Residual"; }
  Module* body() const { return body_; }
  Module* shortcut() const { return shortcut_; }  // null: identity

 private:
  Residual() = default;
  Module* body_ = nullptr;      // owned by the Module base
  Module* shortcut_ = nullptr;  // owned by the Module base; may be null
};

// The sum of a residual block, body + shortcut, with the shapes checked:
// Residual's and ResNet's blocks (tensor/nn/models) add through this one
// function. `where` names the module in the error.
absl::StatusOr<Tensor> AddResidual(const Tensor& body, const Tensor& shortcut,
                                   std::string_view where);

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_POOLING_H_
