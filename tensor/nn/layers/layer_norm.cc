#include "tensor/nn/layers/layer_norm.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/nn/py_repr.h"
#include "tensor/ops.h"

namespace tandem::nn {

absl::StatusOr<std::unique_ptr<LayerNorm>> LayerNorm::Create(
    int64_t dim, const Options& options) {
  return Create(Shape{dim}, options);
}

absl::StatusOr<std::unique_ptr<LayerNorm>> LayerNorm::Create(int64_t dim) {
  return Create(Shape{dim}, Options());
}

absl::StatusOr<std::unique_ptr<LayerNorm>> LayerNorm::Create(
    Shape normalized_shape) {
  return Create(std::move(normalized_shape), Options());
}

absl::StatusOr<std::unique_ptr<LayerNorm>> LayerNorm::Create(
    Shape normalized_shape, const Options& options) {
  bool dims_ok = !normalized_shape.empty();
  for (int64_t d : normalized_shape) dims_ok = dims_ok && d >= 1;
  if (!dims_ok || !std::isfinite(options.eps) || options.eps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::LayerNorm: expected a non-empty normalized_shape of dims >= 1 "
        "and a finite eps >= 0, got normalized_shape=",
        ShapeToString(normalized_shape), ", eps=", options.eps));
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::LayerNorm: dtype must be f32 or f64, got ",
                     std::string(DTypeName(options.dtype))));
  }
  std::unique_ptr<LayerNorm> m(new LayerNorm(normalized_shape, options));
  if (options.elementwise_affine) {
    TANDEM_ASSIGN_OR_RETURN(m->weight_,
                            Tensor::Ones(normalized_shape, options.dtype));
    TANDEM_ASSIGN_OR_RETURN(m->bias_,
                            Tensor::Zeros(normalized_shape, options.dtype));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("weight", m->weight_));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("bias", m->bias_));
  }
  return m;
}

absl::StatusOr<Tensor> LayerNorm::Forward(const Tensor& x) {
  absl::StatusOr<Tensor> y =
      tandem::LayerNorm(x, normalized_shape_, weight_, bias_, options_.eps);
  if (!y.ok()) {
    return absl::Status(y.status().code(),
                        absl::StrCat("nn::LayerNorm(", ExtraRepr(),
                                     "): ", y.status().message()));
  }
  return y;
}

std::string LayerNorm::ExtraRepr() const {
  // Python's tuple repr: (384,) or (3, 4).
  const std::string shape =
      normalized_shape_.size() == 1
          ? absl::StrCat("(", normalized_shape_[0], ",)")
          : absl::StrCat("(", absl::StrJoin(normalized_shape_, ", "), ")");
  return absl::StrCat(
      shape, ", eps=", PyFloatRepr(options_.eps),
      ", elementwise_affine=", options_.elementwise_affine ? "True" : "False");
}

}  // namespace tandem::nn
