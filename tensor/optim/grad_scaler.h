// tandem::optim::GradScaler — PyTorch's torch.cuda.amp.GradScaler: dynamic
// loss scaling for f16 training (bf16 rarely needs it; it is harmless).
//
//   TANDEM_ASSIGN_OR_RETURN(optim::GradScaler scaler,
//                           optim::GradScaler::Create());
//   for (...) {
//     sgd.ZeroGrad();
//     Tensor loss;
//     {
//       amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
//       TANDEM_ASSIGN_OR_RETURN(loss, Mse(model(x), y));
//     }
//     TANDEM_ASSIGN_OR_RETURN(Tensor scaled, scaler.Scale(loss));
//     TANDEM_RETURN_IF_ERROR(scaled.Backward());
//     TANDEM_ASSIGN_OR_RETURN(bool stepped, scaler.Step(sgd));
//     TANDEM_RETURN_IF_ERROR(scaler.Update());
//   }
//
// The algorithm and defaults are PyTorch 1.13's (torch/cuda/amp/
// grad_scaler.py and _amp_update_scale_):
//   - the scale is an f32 value, initially 2^16; Scale(loss) = loss * scale;
//   - Unscale multiplies every gradient by inv_scale = f32(1 / f64(scale))
//     and records whether any gradient held an inf or NaN (found_inf);
//   - Step unscales first if Unscale was not called, then runs the
//     optimizer only when found_inf is false (the step is skipped);
//   - Update: found_inf -> scale *= backoff_factor (0.5), tracker = 0;
//     otherwise ++tracker, and when it reaches growth_interval (2000) the
//     scale *= growth_factor (2.0; kept only if finite) and tracker = 0.
// enabled = false makes every call a pass-through (Scale returns the loss,
// Step runs the optimizer, Update does nothing), as PyTorch's.
//
// Where ranks could disagree (ranks that hold different gradients after
// their reduction, e.g. a sharded optimizer, or a gradient changed after
// DDP's all-reduce), set a FoundInfCombiner: Unscale passes it this rank's
// found_inf and uses what it returns (train/ passes one that all-reduces
// the flag, so every rank skips together). The scaler itself knows nothing
// of communication. Under plain DDP the all-reduced gradients already agree.
//
// Misuse is FailedPrecondition, never silently wrong weights: Unscale twice
// for one optimizer in one step, Step twice, Unscale/Step/Update without a
// Scale since the last Update (PyTorch only checks that Scale ran once
// ever), Update with no Unscale/Step, and an optimizer whose parameters are
// not f32 (PyTorch refuses f16 gradients; f32 masters are what AMP keeps).
//
// Thread-safety: one thread at a time (each simulated rank owns its own).
#ifndef TANDEM_TENSOR_OPTIM_GRAD_SCALER_H_
#define TANDEM_TENSOR_OPTIM_GRAD_SCALER_H_

#include <cstdint>
#include <functional>
#include <map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"

namespace tandem::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;     // 2^16
  double growth_factor = 2.0;      // > 1
  double backoff_factor = 0.5;     // in (0, 1)
  int64_t growth_interval = 2000;  // >= 1
  bool enabled = true;
};

// Takes this rank's found_inf, returns the value every rank agrees on.
using FoundInfCombiner = std::function<absl::StatusOr<bool>(bool found_inf)>;

// What a checkpoint keeps (PyTorch's state_dict: "scale", "_growth_tracker";
// the factors and interval are options).
struct GradScalerState {
  double scale = 65536.0;
  int64_t growth_tracker = 0;
};

class GradScaler {
 public:
  // InvalidArgument for options outside the ranges above.
  static absl::StatusOr<GradScaler> Create(
      const GradScalerOptions& options = {});

  // loss * scale (differentiable; f32 scale times the loss's dtype). Marks
  // this step as scaled. Disabled: returns `loss`.
  absl::StatusOr<Tensor> Scale(const Tensor& loss);

  // Divides `optimizer`'s gradients by the scale in place and records
  // found_inf (after the combiner, if set). Parameters without a gradient
  // are skipped. Call at most once per optimizer per step, before Step
  // (e.g. to clip the true gradients).
  absl::Status Unscale(Optimizer& optimizer);

  // Unscales if needed, then runs optimizer.Step() unless found_inf.
  // Returns whether the optimizer stepped.
  absl::StatusOr<bool> Step(Optimizer& optimizer);

  // Adjusts the scale by this step's found_inf (the OR over the optimizers
  // unscaled this step) and starts the next step.
  absl::Status Update();

  void set_found_inf_combiner(FoundInfCombiner combiner) {
    combiner_ = std::move(combiner);
  }

  bool enabled() const { return options_.enabled; }
  // The current scale (an f32 value) and growth tracker.
  double scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  // Whether this step found an inf/NaN so far (false before any Unscale).
  bool found_inf() const { return found_inf_; }

  GradScalerState StateDict() const;
  // InvalidArgument for a scale that is not finite and positive or a
  // negative tracker.
  absl::Status LoadStateDict(const GradScalerState& state);

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  explicit GradScaler(const GradScalerOptions& options);
  absl::Status CheckScaled(const char* what) const;

  GradScalerOptions options_;
  float scale_ = 65536.0f;
  int64_t growth_tracker_ = 0;
  bool scaled_ = false;                       // Scale ran since the last Update
  bool found_inf_ = false;                    // this step, over every optimizer
  std::map<const Optimizer*, Stage> stages_;  // this step's optimizers
  FoundInfCombiner combiner_;
};

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_GRAD_SCALER_H_
