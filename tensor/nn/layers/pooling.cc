#include "tensor/nn/layers/pooling.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/ops.h"

namespace tandem::nn {
namespace {

// PyTorch prints what the user passed: an int for a square size, which is
// how the (h, w) constructors above are meant; a tuple otherwise.
std::string Size(const std::array<int64_t, 2>& s) {
  if (s[0] == s[1]) return absl::StrCat(s[0]);
  return absl::StrCat("(", s[0], ", ", s[1], ")");
}

// The stride PyTorch reports: the kernel where left at 0.
std::array<int64_t, 2> Stride(const std::array<int64_t, 2>& stride,
                              const std::array<int64_t, 2>& kernel) {
  return {stride[0] == 0 ? kernel[0] : stride[0],
          stride[1] == 0 ? kernel[1] : stride[1]};
}

}  // namespace

absl::StatusOr<Tensor> MaxPool2d::Forward(const Tensor& input) {
  return tandem::MaxPool2d(input, options_);
}

std::string MaxPool2d::ExtraRepr() const {
  return absl::StrCat(
      "kernel_size=", Size(options_.kernel),
      ", stride=", Size(Stride(options_.stride, options_.kernel)),
      ", padding=", Size(options_.padding), ", dilation=1, ceil_mode=False");
}

absl::StatusOr<Tensor> AvgPool2d::Forward(const Tensor& input) {
  return tandem::AvgPool2d(input, options_);
}

std::string AvgPool2d::ExtraRepr() const {
  return absl::StrCat("kernel_size=", Size(options_.kernel), ", stride=",
                      Size(Stride(options_.stride, options_.kernel)),
                      ", padding=", Size(options_.padding));
}

absl::StatusOr<Tensor> AdaptiveAvgPool2d::Forward(const Tensor& input) {
  return tandem::AdaptiveAvgPool2d(input, output_size_);
}

std::string AdaptiveAvgPool2d::ExtraRepr() const {
  return absl::StrCat("output_size=(", output_size_[0], ", ", output_size_[1],
                      ")");
}

absl::StatusOr<std::unique_ptr<Residual>> Residual::Create(
    std::unique_ptr<Module> body, std::unique_ptr<Module> shortcut) {
  if (body == nullptr) {
    return absl::InvalidArgumentError(
        "Residual::Create: body is null; pass the module whose output is "
        "added to the shortcut");
  }
  auto r = std::unique_ptr<Residual>(new Residual());
  TANDEM_ASSIGN_OR_RETURN(r->body_, r->RegisterModule("body", std::move(body)));
  if (shortcut != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(r->shortcut_,
                            r->RegisterModule("shortcut", std::move(shortcut)));
  }
  return r;
}

absl::StatusOr<Tensor> Residual::Forward(const Tensor& input) {
  TANDEM_ASSIGN_OR_RETURN(Tensor y, body_->Forward(input));
  Tensor s = input;
  if (shortcut_ != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(s, shortcut_->Forward(input));
  }
  return AddResidual(y, s, "Residual");
}

absl::StatusOr<Tensor> AddResidual(const Tensor& body, const Tensor& shortcut,
                                   std::string_view where) {
  if (body.shape() != shortcut.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(where), ": the body gives ", ShapeToString(body.shape()),
        " but the shortcut gives ", ShapeToString(shortcut.shape()),
        "; they must be equal (give the block a shortcut module, e.g. a "
        "strided 1x1 convolution, that maps the input to the body's shape)"));
  }
  return Add(body, shortcut);
}

}  // namespace tandem::nn
