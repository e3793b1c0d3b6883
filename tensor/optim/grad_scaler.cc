#include "tensor/optim/grad_scaler.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/ops.h"

namespace tandem::optim {
namespace {

// grad *= inv_scale in f32 (as _amp_foreach_non_finite_check_and_unscale_);
// true when an element was inf or NaN before scaling.
absl::StatusOr<bool> UnscaleOne(const Tensor& grad, float inv_scale) {
  if (!grad.device().is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(Tensor host, grad.To(Device::CPU()));
    TANDEM_ASSIGN_OR_RETURN(bool found, UnscaleOne(host, inv_scale));
    TANDEM_RETURN_IF_ERROR(grad.CopyFrom(host));
    return found;
  }
  float* g = grad.data<float>();
  const int64_t n = grad.numel();
  bool found = false;
  for (int64_t i = 0; i < n; ++i) {
    found |= !std::isfinite(g[i]);
    g[i] *= inv_scale;
  }
  return found;
}

}  // namespace

GradScaler::GradScaler(const GradScalerOptions& options)
    : options_(options), scale_(static_cast<float>(options.init_scale)) {}

absl::StatusOr<GradScaler> GradScaler::Create(
    const GradScalerOptions& options) {
  if (!(std::isfinite(options.init_scale) && options.init_scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradScaler: init_scale must be finite and > 0, got ",
                     options.init_scale));
  }
  if (!(std::isfinite(options.growth_factor) && options.growth_factor > 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradScaler: growth_factor must be > 1, got ", options.growth_factor));
  }
  if (!(options.backoff_factor > 0 && options.backoff_factor < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradScaler: backoff_factor must be in (0, 1), got ",
                     options.backoff_factor));
  }
  if (options.growth_interval < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GradScaler: growth_interval must be >= 1, got ",
                     options.growth_interval));
  }
  return GradScaler(options);
}

absl::Status GradScaler::CheckScaled(const char* what) const {
  if (scaled_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "GradScaler::", what,
      " without a Scale(loss) since the last Update(): the gradients are "
      "not scaled, so unscaling them would shrink them by the scale (",
      scale_,
      "); backpropagate scaler.Scale(loss) before Unscale/Step/Update"));
}

absl::StatusOr<Tensor> GradScaler::Scale(const Tensor& loss) {
  if (!options_.enabled) return loss;
  if (!loss.defined()) {
    return absl::InvalidArgumentError("GradScaler::Scale: undefined loss");
  }
  scaled_ = true;
  return Mul(loss, static_cast<double>(scale_));
}

absl::Status GradScaler::Unscale(Optimizer& optimizer) {
  if (!options_.enabled) return absl::OkStatus();
  TANDEM_RETURN_IF_ERROR(CheckScaled("Unscale"));
  Stage& stage = stages_[&optimizer];
  if (stage == Stage::kUnscaled) {
    return absl::FailedPreconditionError(
        "GradScaler::Unscale has already been called on this optimizer "
        "since the last Update(); call it at most once per step (Step "
        "unscales by itself when needed)");
  }
  if (stage == Stage::kStepped) {
    return absl::FailedPreconditionError(
        "GradScaler::Unscale is being called after Step() on this optimizer "
        "in the same step; call Update() first");
  }
  const std::vector<Tensor>& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].dtype() != DType::kF32) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GradScaler: parameter ", i, " of the optimizer is ",
          DTypeName(params[i].dtype()),
          "; mixed precision keeps f32 master parameters (autocast casts "
          "them per op): create the model in f32"));
    }
  }
  // PyTorch: inv_scale = _scale.double().reciprocal().float().
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  bool found = false;
  for (const Tensor& p : params) {
    if (!p.has_grad()) continue;
    TANDEM_ASSIGN_OR_RETURN(bool f, UnscaleOne(p.grad(), inv_scale));
    found |= f;
  }
  if (combiner_) {
    TANDEM_ASSIGN_OR_RETURN(found, combiner_(found));
  }
  found_inf_ |= found;
  stage = Stage::kUnscaled;
  return absl::OkStatus();
}

absl::StatusOr<bool> GradScaler::Step(Optimizer& optimizer) {
  if (!options_.enabled) {
    TANDEM_RETURN_IF_ERROR(optimizer.Step());
    return true;
  }
  TANDEM_RETURN_IF_ERROR(CheckScaled("Step"));
  auto it = stages_.find(&optimizer);
  if (it != stages_.end() && it->second == Stage::kStepped) {
    return absl::FailedPreconditionError(
        "GradScaler::Step has already been called on this optimizer since "
        "the last Update(); call Update() once per step");
  }
  if (it == stages_.end() || it->second == Stage::kReady) {
    TANDEM_RETURN_IF_ERROR(Unscale(optimizer));
  }
  stages_[&optimizer] = Stage::kStepped;
  if (found_inf_) return false;
  TANDEM_RETURN_IF_ERROR(optimizer.Step());
  return true;
}

absl::Status GradScaler::Update() {
  if (!options_.enabled) return absl::OkStatus();
  TANDEM_RETURN_IF_ERROR(CheckScaled("Update"));
  if (stages_.empty()) {
    return absl::FailedPreconditionError(
        "GradScaler::Update: no inf checks were recorded this step; call "
        "Step(optimizer) (or Unscale) before Update()");
  }
  // _amp_update_scale_, in f32 like the scale tensor.
  if (found_inf_) {
    scale_ *= static_cast<float>(options_.backoff_factor);
    growth_tracker_ = 0;
  } else {
    const int64_t successful = growth_tracker_ + 1;
    if (successful == options_.growth_interval) {
      const float grown = scale_ * static_cast<float>(options_.growth_factor);
      if (std::isfinite(grown)) scale_ = grown;
      growth_tracker_ = 0;
    } else {
      growth_tracker_ = successful;
    }
  }
  scaled_ = false;
  found_inf_ = false;
  stages_.clear();
  return absl::OkStatus();
}

GradScalerState GradScaler::StateDict() const {
  return {.scale = scale_, .growth_tracker = growth_tracker_};
}

absl::Status GradScaler::LoadStateDict(const GradScalerState& state) {
  if (!(std::isfinite(state.scale) && state.scale > 0) ||
      state.growth_tracker < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GradScaler::LoadStateDict: need a finite scale > 0 and a tracker "
        ">= 0, got scale ",
        state.scale, " and tracker ", state.growth_tracker));
  }
  scale_ = static_cast<float>(state.scale);
  growth_tracker_ = state.growth_tracker;
  return absl::OkStatus();
}

}  // namespace tandem::optim
