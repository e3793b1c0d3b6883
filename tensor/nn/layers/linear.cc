#include "tensor/nn/layers/linear.h"

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

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(int64_t in_features,
                                                       int64_t out_features,
                                                       Generator& gen) {
  return Create(in_features, out_features, gen, Options());
}

absl::StatusOr<std::unique_ptr<Linear>> Linear::Create(int64_t in_features,
                                                       int64_t out_features,
                                                       Generator& gen,
                                                       const Options& options) {
  if (in_features < 0 || out_features < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::Linear: in_features and out_features must be >= 0, got ",
        in_features, " and ", out_features));
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::Linear: dtype must be f32 or f64, got ",
                     std::string(DTypeName(options.dtype))));
  }
  std::unique_ptr<Linear> layer(new Linear(in_features, out_features));
  TANDEM_ASSIGN_OR_RETURN(
      layer->weight_,
      Tensor::Empty({out_features, in_features}, options.dtype));
  // PyTorch's reset_parameters(): the weight's draws, then the bias's.
  if (in_features > 0) {
    TANDEM_RETURN_IF_ERROR(
        init::KaimingUniform(layer->weight_, std::sqrt(5.0), gen));
  } else {
    TANDEM_RETURN_IF_ERROR(FillInPlace(layer->weight_, 0.0));
  }
  TANDEM_RETURN_IF_ERROR(layer->RegisterParameter("weight", layer->weight_));
  if (options.bias) {
    TANDEM_ASSIGN_OR_RETURN(layer->bias_,
                            Tensor::Empty({out_features}, options.dtype));
    const double bound =
        in_features > 0 ? 1 / std::sqrt(static_cast<double>(in_features)) : 0;
    TANDEM_RETURN_IF_ERROR(init::Uniform(layer->bias_, -bound, bound, gen));
    TANDEM_RETURN_IF_ERROR(layer->RegisterParameter("bias", layer->bias_));
  }
  return layer;
}

absl::StatusOr<Tensor> Linear::Forward(const Tensor& input) {
  if (!input.defined() || input.ndim() != 2 || input.dim(1) != in_features_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::Linear(in_features=", in_features_, ", out_features=",
        out_features_, "): expected input [N, ", in_features_, "], got ",
        input.defined() ? ShapeToString(input.shape()) : "an undefined tensor",
        input.defined() && input.ndim() > 2
            ? " (flatten it first, e.g. with nn::Flatten)"
            : ""));
  }
  return tandem::Linear(input, weight_, bias_);
}

std::string Linear::ExtraRepr() const {
  return absl::StrCat("in_features=", in_features_,
                      ", out_features=", out_features_,
                      ", bias=", bias_.defined() ? "True" : "False");
}

}  // namespace tandem::nn
