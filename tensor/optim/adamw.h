// tandem::optim::AdamW — Adam with decoupled weight decay, exactly
// torch.optim.AdamW (defaults lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// weight_decay 0.01).
//
//   TANDEM_ASSIGN_OR_RETURN(tandem::optim::AdamW adam,
//       tandem::optim::AdamW::Create(model->Parameters()));
//   TANDEM_RETURN_IF_ERROR(adam.Step());
//
// For each parameter p with gradient g, at its step t = 1, 2, ...:
//   g = -g                                   if maximize
//   p = p * (1 - lr * weight_decay)          (decoupled decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   v_max = max(v_max, v)                    if amsgrad (then v_max below)
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p = p - (lr / (1 - beta1^t)) * m / denom
// The scalar factors are computed in double, rounded to the parameter's
// dtype, and applied in ATen's order (with its fused multiply-adds), so
// results are bit-identical to PyTorch 1.13 on x86-64 (see adamw_test.cc).
// m and v start at zero on a parameter's first step with a gradient; t
// counts that parameter's own steps.
//
// Parameter groups, as torch.optim.AdamW([{'params': decay,
// 'weight_decay': 0.1}, {'params': no_decay, 'weight_decay': 0.0}],
// lr=6e-4): each AdamWParamGroup's unset options take the defaults';
// lr, betas, eps and weight_decay may differ per group, amsgrad and
// maximize are the optimizer's (the defaults'). WeightDecayGroups
// (param_groups.h) builds nanoGPT's two groups from a module.
#ifndef TANDEM_TENSOR_OPTIM_ADAMW_H_
#define TANDEM_TENSOR_OPTIM_ADAMW_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace internal {
struct AdamWScalars;  // update_kernels.h
}  // namespace internal

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

// One parameter group: its parameters and the options it overrides.
struct AdamWParamGroup {
  std::vector<Tensor> params = {};
  std::optional<double> lr = std::nullopt;
  std::optional<double> beta1 = std::nullopt;
  std::optional<double> beta2 = std::nullopt;
  std::optional<double> eps = std::nullopt;
  std::optional<double> weight_decay = std::nullopt;
};

class AdamW : public Optimizer {
 public:
  // Errors (InvalidArgument, in PyTorch's wording, e.g. "Invalid beta
  // parameter at index 0: 1"): lr, eps or weight_decay negative or not
  // finite; a beta outside [0, 1); a bad parameter list (see Optimizer).
  static absl::StatusOr<AdamW> Create(std::vector<Tensor> params,
                                      AdamWOptions options = {});
  // Parameter groups (see the header comment): the same checks on every
  // group's resolved options (the message names the group); parameters are
  // numbered group after group; a tensor in two groups is refused; empty
  // groups are allowed but not an empty whole.
  static absl::StatusOr<AdamW> Create(std::vector<AdamWParamGroup> groups,
                                      AdamWOptions defaults = {});

  absl::Status Step() override;
  // Per-element weight decay (Optimizer::SetElementWeightDecay): each run's
  // elements step with decay = 1 - lr * run.weight_decay, computed as the
  // group's is, so a run with the weight decay of a parameter's own group
  // steps it bit for bit as that group would.
  absl::Status SetElementWeightDecay(size_t i,
                                     std::vector<WeightDecayRun> runs) override;
  // For every parameter that has stepped: "<i>.step" (an i64 scalar; PyTorch
  // 1.13 keeps an f32 one), "<i>.exp_avg", "<i>.exp_avg_sq" and, with
  // amsgrad, "<i>.max_exp_avg_sq".
  std::vector<StateEntry> ExportState() const override;
  absl::Status ImportState(const std::vector<StateEntry>& state) override;

  // The defaults (group 0's options without groups); options_.lr is the
  // initial rate, lr() the current one.
  const AdamWOptions& options() const { return options_; }
  // Group g's options (its .lr is the group's initial rate; lr(g) is
  // current).
  const AdamWOptions& group_options(size_t g) const {
    return group_options_.at(g);
  }
  // Steps taken by parameter i (0 before its first).
  int64_t step_count(size_t i) const { return state_.at(i).step; }
  // Parameter i's first and second moment estimates; undefined before its
  // first step.
  const Tensor& exp_avg(size_t i) const { return state_.at(i).exp_avg; }
  const Tensor& exp_avg_sq(size_t i) const { return state_.at(i).exp_avg_sq; }

 private:
  struct ParamState {
    int64_t step = 0;
    Tensor exp_avg;
    Tensor exp_avg_sq;
    Tensor max_exp_avg_sq;  // amsgrad only
  };

  AdamW(std::vector<Tensor> params, std::vector<Group> groups,
        AdamWOptions defaults, std::vector<AdamWOptions> group_options)
      : Optimizer(std::move(params), std::move(groups)),
        options_(defaults),
        group_options_(std::move(group_options)),
        state_(params_.size()) {}

  // Create's hyper-parameter checks; `who` names the optimizer or group.
  static absl::Status CheckOptions(const std::string& who,
                                   const AdamWOptions& o);
  // One AdamW update of p's elements [begin, begin + n) with scalars `s`.
  absl::Status StepRange(const Tensor& p, ParamState& st, const AdamWOptions& o,
                         const internal::AdamWScalars& s, int64_t begin,
                         int64_t n) const;
  std::map<std::string, double> GroupOptions(size_t g) const override;
  absl::Status SetGroupOptions(
      const std::vector<std::map<std::string, double>>& options) override;

  AdamWOptions options_;                     // the defaults
  std::vector<AdamWOptions> group_options_;  // one per group
  std::vector<ParamState> state_;
  // Per parameter: empty (the group's weight decay) or its runs.
  std::vector<std::vector<WeightDecayRun>> decay_runs_ =
      std::vector<std::vector<WeightDecayRun>>(params_.size());
};

}  // namespace tandem::optim

#endif  // TANDEM_TENSOR_OPTIM_ADAMW_H_
