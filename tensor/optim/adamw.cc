#include "tensor/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/trace/trace.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/optim/update_kernels.h"
#include "tensor/tensor.h"

namespace tandem::optim {

absl::Status AdamW::CheckOptions(const std::string& who,
                                 const AdamWOptions& o) {
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter(who, "learning rate", "lr", o.lr, o.lr >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(who, "epsilon value", "eps", o.eps,
                                             o.eps >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter(who, "beta parameter at index 0", "beta1", o.beta1,
                          o.beta1 >= 0 && o.beta1 < 1, "in [0, 1)"));
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter(who, "beta parameter at index 1", "beta2", o.beta2,
                          o.beta2 >= 0 && o.beta2 < 1, "in [0, 1)"));
  return CheckHyperParameter(who, "weight_decay value", "weight_decay",
                             o.weight_decay, o.weight_decay >= 0, ">= 0");
}

absl::StatusOr<AdamW> AdamW::Create(std::vector<Tensor> params,
                                    AdamWOptions options) {
  std::vector<AdamWParamGroup> groups(1);
  groups[0].params = std::move(params);
  return Create(std::move(groups), options);
}

absl::StatusOr<AdamW> AdamW::Create(std::vector<AdamWParamGroup> groups,
                                    AdamWOptions defaults) {
  TANDEM_RETURN_IF_ERROR(CheckOptions("AdamW", defaults));
  if (groups.empty()) {
    return absl::InvalidArgumentError(
        "AdamW: got no parameter groups; pass at least one group");
  }
  std::vector<Tensor> params;
  std::vector<Group> ranges;
  std::vector<AdamWOptions> options;
  for (size_t g = 0; g < groups.size(); ++g) {
    AdamWParamGroup& group = groups[g];
    AdamWOptions o = defaults;
    o.lr = group.lr.value_or(o.lr);
    o.beta1 = group.beta1.value_or(o.beta1);
    o.beta2 = group.beta2.value_or(o.beta2);
    o.eps = group.eps.value_or(o.eps);
    o.weight_decay = group.weight_decay.value_or(o.weight_decay);
    TANDEM_RETURN_IF_ERROR(CheckOptions(
        groups.size() > 1 ? absl::StrCat("AdamW parameter group ", g)
                          : std::string("AdamW"),
        o));
    ranges.push_back(
        {params.size(), params.size() + group.params.size(), o.lr});
    for (Tensor& p : group.params) params.push_back(std::move(p));
    options.push_back(o);
  }
  TANDEM_RETURN_IF_ERROR(ValidateParams("AdamW", params));
  return AdamW(std::move(params), std::move(ranges), defaults,
               std::move(options));
}

std::map<std::string, double> AdamW::GroupOptions(size_t g) const {
  const AdamWOptions& o = group_options_.at(g);
  return {{"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay}};
}

absl::Status AdamW::SetGroupOptions(
    const std::vector<std::map<std::string, double>>& options) {
  std::vector<AdamWOptions> next = group_options_;
  for (size_t g = 0; g < next.size(); ++g) {
    AdamWOptions& o = next[g];
    TANDEM_RETURN_IF_ERROR(
        ReadGroupOptions(g, options.at(g),
                         {{"beta1", &o.beta1},
                          {"beta2", &o.beta2},
                          {"eps", &o.eps},
                          {"weight_decay", &o.weight_decay}}));
    TANDEM_RETURN_IF_ERROR(
        CheckOptions(absl::StrCat("AdamW parameter group ", g), o));
  }
  group_options_ = std::move(next);
  return absl::OkStatus();
}

absl::Status AdamW::Step() {
  trace::Scope event("AdamW step", "optim");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    TANDEM_RETURN_IF_ERROR(CheckStepable("AdamW", i));
    ParamState& st = state_[i];
    const size_t group = GroupOf(i);
    const AdamWOptions& o = group_options_[group];
    const double lr = groups_[group].lr;
    if (st.step == 0) {
      TANDEM_ASSIGN_OR_RETURN(st.exp_avg,
                              Tensor::Zeros(p.shape(), p.dtype(), p.device()));
      TANDEM_ASSIGN_OR_RETURN(st.exp_avg_sq,
                              Tensor::Zeros(p.shape(), p.dtype(), p.device()));
      if (options_.amsgrad) {
        TANDEM_ASSIGN_OR_RETURN(
            st.max_exp_avg_sq, Tensor::Zeros(p.shape(), p.dtype(), p.device()));
      }
    }
    ++st.step;
    const double t = static_cast<double>(st.step);
    internal::AdamWScalars s;
    s.step_size = lr / (1 - std::pow(o.beta1, t));
    s.bias2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
    // The whole parameter with its group's weight decay, or run by run
    // (AdamW is elementwise: a run steps as the whole would).
    if (decay_runs_[i].empty()) {
      s.decay = 1 - lr * o.weight_decay;
      TANDEM_RETURN_IF_ERROR(StepRange(p, st, o, s, 0, p.numel()));
      continue;
    }
    for (const WeightDecayRun& run : decay_runs_[i]) {
      s.decay = 1 - lr * run.weight_decay;
      TANDEM_RETURN_IF_ERROR(
          StepRange(p, st, o, s, run.begin, run.end - run.begin));
    }
  }
  return absl::OkStatus();
}

absl::Status AdamW::StepRange(const Tensor& p, ParamState& st,
                              const AdamWOptions& o,
                              const internal::AdamWScalars& s, int64_t begin,
                              int64_t n) const {
  const Tensor g = p.grad();
  if (!p.device().is_cpu()) {
    TANDEM_ASSIGN_OR_RETURN(AdamWStepKernel * step,
                            AdamWStepKernels().For(p.device()));
    AdamWStepArgs args;
    args.beta1 = o.beta1;
    args.beta2 = o.beta2;
    args.eps = o.eps;
    args.decay = s.decay;
    args.step_size = s.step_size;
    args.bias2_sqrt = s.bias2_sqrt;
    args.amsgrad = options_.amsgrad;
    args.maximize = options_.maximize;
    if (begin == 0 && n == p.numel()) {
      return step(p, g, st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq, args);
    }
    auto part = [&](const Tensor& t) -> absl::StatusOr<Tensor> {
      if (!t.defined()) return t;
      return t.Detach().View(begin, {n});
    };
    TANDEM_ASSIGN_OR_RETURN(Tensor pp, part(p));
    TANDEM_ASSIGN_OR_RETURN(Tensor gp, part(g));
    TANDEM_ASSIGN_OR_RETURN(Tensor m, part(st.exp_avg));
    TANDEM_ASSIGN_OR_RETURN(Tensor v, part(st.exp_avg_sq));
    TANDEM_ASSIGN_OR_RETURN(Tensor vmax, part(st.max_exp_avg_sq));
    return step(pp, gp, m, v, vmax, args);
  }
  if (p.dtype() == DType::kF32) {
    internal::AdamWUpdate<float>(
        p.data<float>() + begin, g.data<float>() + begin,
        st.exp_avg.data<float>() + begin, st.exp_avg_sq.data<float>() + begin,
        options_.amsgrad ? st.max_exp_avg_sq.data<float>() + begin : nullptr, n,
        o, s);
  } else {
    internal::AdamWUpdate<double>(
        p.data<double>() + begin, g.data<double>() + begin,
        st.exp_avg.data<double>() + begin, st.exp_avg_sq.data<double>() + begin,
        options_.amsgrad ? st.max_exp_avg_sq.data<double>() + begin : nullptr,
        n, o, s);
  }
  return absl::OkStatus();
}

absl::Status AdamW::SetElementWeightDecay(size_t i,
                                          std::vector<WeightDecayRun> runs) {
  TANDEM_RETURN_IF_ERROR(CheckWeightDecayRuns("AdamW", i, runs));
  decay_runs_[i] = std::move(runs);
  return absl::OkStatus();
}

std::vector<StateEntry> AdamW::ExportState() const {
  std::vector<StateEntry> out;
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& st = state_[i];
    if (st.step == 0) continue;
    absl::StatusOr<Tensor> step =
        Tensor::FromVector<int64_t>({st.step}, Shape{});
    if (step.ok()) out.push_back({absl::StrCat(i, ".step"), *step});
    out.push_back({absl::StrCat(i, ".exp_avg"), st.exp_avg});
    out.push_back({absl::StrCat(i, ".exp_avg_sq"), st.exp_avg_sq});
    if (st.max_exp_avg_sq.defined()) {
      out.push_back({absl::StrCat(i, ".max_exp_avg_sq"), st.max_exp_avg_sq});
    }
  }
  return out;
}

absl::Status AdamW::ImportState(const std::vector<StateEntry>& state) {
  std::vector<ParamState> next(params_.size());
  std::vector<bool> has_step(params_.size(), false);
  for (const StateEntry& e : state) {
    size_t i = 0;
    std::string key;
    TANDEM_RETURN_IF_ERROR(ParseStateName("AdamW", e.name, i, key));
    ParamState& st = next[i];
    Tensor* slot = nullptr;
    if (key == "step") {
      absl::StatusOr<std::vector<int64_t>> v =
          e.tensor.defined() && e.tensor.ndim() == 0 &&
                  e.tensor.dtype() == DType::kI64
              ? e.tensor.ToVector<int64_t>()
              : absl::StatusOr<std::vector<int64_t>>(
                    absl::InvalidArgumentError("not an i64 scalar"));
      if (!v.ok() || (*v)[0] < 1 || has_step[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("AdamW: optimizer state entry \"", e.name,
                         "\" must be given once, as an i64 scalar >= 1"));
      }
      has_step[i] = true;
      st.step = (*v)[0];
      continue;
    }
    if (key == "exp_avg") {
      slot = &st.exp_avg;
    } else if (key == "exp_avg_sq") {
      slot = &st.exp_avg_sq;
    } else if (key == "max_exp_avg_sq" && options_.amsgrad) {
      slot = &st.max_exp_avg_sq;
    }
    if (slot == nullptr || slot->defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AdamW: optimizer state entry \"", e.name,
          "\" is unknown or given twice (AdamW keeps step, exp_avg, "
          "exp_avg_sq and, with amsgrad, max_exp_avg_sq)"));
    }
    TANDEM_ASSIGN_OR_RETURN(*slot, StateLike("AdamW", e.name, e.tensor, i));
  }
  for (size_t i = 0; i < next.size(); ++i) {
    const ParamState& st = next[i];
    const bool any = has_step[i] || st.exp_avg.defined() ||
                     st.exp_avg_sq.defined() || st.max_exp_avg_sq.defined();
    const bool all = has_step[i] && st.exp_avg.defined() &&
                     st.exp_avg_sq.defined() &&
                     (!options_.amsgrad || st.max_exp_avg_sq.defined());
    if (any && !all) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AdamW: the optimizer state of parameter ", i,
          " is incomplete: expected ", i, ".step, ", i, ".exp_avg, ", i,
          ".exp_avg_sq",
          options_.amsgrad ? absl::StrCat(" and ", i, ".max_exp_avg_sq") : "",
          " together"));
    }
  }
  state_ = std::move(next);
  return absl::OkStatus();
}

}  // namespace tandem::optim
