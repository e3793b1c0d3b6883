#include "tensor/nn/layers/batch_norm.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/nn/py_repr.h"
#include "tensor/ops.h"

namespace tandem::nn {

absl::StatusOr<std::unique_ptr<BatchNorm2d>> BatchNorm2d::Create(
    int64_t num_features) {
  return Create(num_features, Options());
}

absl::StatusOr<std::unique_ptr<BatchNorm2d>> BatchNorm2d::Create(
    int64_t num_features, const Options& options) {
  if (num_features < 1 || !std::isfinite(options.eps) || options.eps < 0 ||
      (options.momentum.has_value() && !std::isfinite(*options.momentum))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::BatchNorm2d: expected num_features >= 1, a finite eps >= 0 and a "
        "finite momentum (or none), got num_features=",
        num_features, ", eps=", options.eps, ", momentum=",
        options.momentum.has_value() ? PyFloatRepr(*options.momentum)
                                     : "None"));
  }
  if (options.dtype != DType::kF32 && options.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("nn::BatchNorm2d: dtype must be f32 or f64, got ",
                     std::string(DTypeName(options.dtype))));
  }
  std::unique_ptr<BatchNorm2d> m(new BatchNorm2d(num_features, options));
  const Shape c = {num_features};
  if (options.affine) {
    TANDEM_ASSIGN_OR_RETURN(m->weight_, Tensor::Ones(c, options.dtype));
    TANDEM_ASSIGN_OR_RETURN(m->bias_, Tensor::Zeros(c, options.dtype));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("weight", m->weight_));
    TANDEM_RETURN_IF_ERROR(m->RegisterParameter("bias", m->bias_));
  }
  if (options.track_running_stats) {
    TANDEM_ASSIGN_OR_RETURN(m->running_mean_, Tensor::Zeros(c, options.dtype));
    TANDEM_ASSIGN_OR_RETURN(m->running_var_, Tensor::Ones(c, options.dtype));
    TANDEM_ASSIGN_OR_RETURN(m->num_batches_tracked_,
                            Tensor::Zeros({}, DType::kI64));
    TANDEM_RETURN_IF_ERROR(m->RegisterBuffer("running_mean", m->running_mean_));
    TANDEM_RETURN_IF_ERROR(m->RegisterBuffer("running_var", m->running_var_));
    TANDEM_RETURN_IF_ERROR(
        m->RegisterBuffer("num_batches_tracked", m->num_batches_tracked_));
  }
  return m;
}

absl::StatusOr<Tensor> BatchNorm2d::Forward(const Tensor& x) {
  if (!x.defined() || x.ndim() != 4 || x.dim(1) != num_features_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nn::BatchNorm2d(", ExtraRepr(), "): expected input [N, ",
        num_features_, ", H, W], got ",
        x.defined()
            ? absl::StrCat(DTypeName(x.dtype()), ShapeToString(x.shape()))
            : "an undefined tensor"));
  }
  const bool tracking = options_.track_running_stats;
  // The batch is counted only once the op has succeeded.
  const bool update = is_training() && tracking;
  RunningUpdate next;
  if (update) {
    TANDEM_ASSIGN_OR_RETURN(next, NextRunningUpdate());
  }
  // Batch statistics in training, and always without running statistics.
  const bool batch_stats = is_training() || !tracking;
  absl::StatusOr<Tensor> y =
      tandem::BatchNorm(x, weight_, bias_, running_mean_, running_var_,
                        batch_stats, next.factor, options_.eps);
  if (!y.ok()) {
    return absl::Status(y.status().code(),
                        absl::StrCat("nn::BatchNorm2d(", ExtraRepr(),
                                     "): ", y.status().message()));
  }
  if (update) TANDEM_RETURN_IF_ERROR(CountBatch(next));
  return y;
}

absl::StatusOr<BatchNorm2d::RunningUpdate> BatchNorm2d::NextRunningUpdate()
    const {
  TANDEM_ASSIGN_OR_RETURN(const double tracked, num_batches_tracked_.Item());
  RunningUpdate next;
  next.batches = static_cast<int64_t>(tracked) + 1;
  next.factor = options_.momentum.has_value()
                    ? *options_.momentum
                    : 1.0 / static_cast<double>(next.batches);
  return next;
}

absl::Status BatchNorm2d::CountBatch(const RunningUpdate& update) {
  return FillInPlace(num_batches_tracked_, static_cast<double>(update.batches));
}

std::string BatchNorm2d::ExtraRepr() const {
  return absl::StrCat(
      num_features_, ", eps=", PyFloatRepr(options_.eps), ", momentum=",
      options_.momentum.has_value() ? PyFloatRepr(*options_.momentum) : "None",
      ", affine=", options_.affine ? "True" : "False", ", track_running_stats=",
      options_.track_running_stats ? "True" : "False");
}

}  // namespace tandem::nn
