#include "tensor/nn/layers/activation.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tensor/ops.h"

namespace tandem::nn {

absl::StatusOr<Tensor> ReLU::Forward(const Tensor& input) {
  return Relu(input);
}

absl::StatusOr<Tensor> Softmax::Forward(const Tensor& input) {
  return tandem::Softmax(input, dim_);
}

std::string Softmax::ExtraRepr() const { return absl::StrCat("dim=", dim_); }

}  // namespace tandem::nn
