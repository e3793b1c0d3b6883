#include "tensor/nn/layers/flatten.h"

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tensor/ops.h"

namespace tandem::nn {

absl::StatusOr<Tensor> Flatten::Forward(const Tensor& input) {
  return tandem::Flatten(input, start_dim_, end_dim_);
}

std::string Flatten::ExtraRepr() const {
  return absl::StrCat("start_dim=", start_dim_, ", end_dim=", end_dim_);
}

}  // namespace tandem::nn
