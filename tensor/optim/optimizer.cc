#include "tensor/optim/optimizer.h"

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

std::string Describe(const Tensor& t) {
  return absl::StrCat(ShapeToString(t.shape()), " ",
                      std::string(DTypeName(t.dtype())));
}

}  // namespace

absl::Status Optimizer::CheckHyperParameter(std::string_view who,
                                            std::string_view pytorch_name,
                                            std::string_view option,
                                            double value, bool meets_rule,
                                            std::string_view rule) {
  if (std::isfinite(value) && meets_rule) return absl::OkStatus();
  // This absl's StrCat takes std::string, not std::string_view.
  const std::string rule_text(rule);
  const std::string name(option);
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(who), ": Invalid ", std::string(pytorch_name), ": ", value,
      " (", name, " must be finite", rule.empty() ? "" : " and ", rule_text,
      "): pass a finite ", name, rule.empty() ? "" : " ", rule_text,
      std::isfinite(value)
          ? ""
          : "; inf and nan would turn every parameter into nan"));
}

absl::Status Optimizer::SetElementWeightDecay(
    size_t i, std::vector<WeightDecayRun> runs) {
  (void)i;
  (void)runs;
  return absl::UnimplementedError(
      "this optimizer has no per-element weight decay; use AdamW, or give "
      "every parameter group the same weight_decay");
}

absl::Status Optimizer::CheckWeightDecayRuns(
    std::string_view who, size_t i,
    const std::vector<WeightDecayRun>& runs) const {
  if (i >= params_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(who), ": SetElementWeightDecay of parameter ",
                     i, ", but there are ", params_.size(), " parameters"));
  }
  int64_t at = 0;
  for (const WeightDecayRun& r : runs) {
    if (r.begin != at || r.end <= r.begin || !std::isfinite(r.weight_decay) ||
        r.weight_decay < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(who), ": SetElementWeightDecay of parameter ", i,
          ": run [", r.begin, ", ", r.end, ") with weight_decay ",
          r.weight_decay, " after element ", at,
          "; runs must cover the parameter in order without gaps, each "
          "non-empty with a finite weight_decay >= 0"));
    }
    at = r.end;
  }
  if (!runs.empty() && at != params_[i].numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(who), ": SetElementWeightDecay of parameter ",
                     i, ": the runs end at element ", at,
                     " but the parameter has ", params_[i].numel()));
  }
  return absl::OkStatus();
}

void Optimizer::ZeroGrad(bool set_to_none) {
  for (const Tensor& p : params_) {
    if (set_to_none) {
      p.ClearGrad();
    } else {
      p.ZeroGrad();
    }
  }
}

absl::Status Optimizer::set_lr(double lr) {
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
      "Optimizer::set_lr", "learning rate", "lr", lr, lr >= 0, ">= 0"));
  for (Group& group : groups_) group.lr = lr;
  return absl::OkStatus();
}

absl::Status Optimizer::set_lr(size_t g, double lr) {
  if (g >= groups_.size()) {
    return absl::OutOfRangeError(absl::StrCat(
        "Optimizer::set_lr: parameter group ", g,
        " does not exist; the optimizer has ", groups_.size(), " group(s)"));
  }
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
      "Optimizer::set_lr", "learning rate", "lr", lr, lr >= 0, ">= 0"));
  groups_[g].lr = lr;
  return absl::OkStatus();
}

absl::Status Optimizer::ReadGroupOptions(
    size_t g, const std::map<std::string, double>& options,
    const std::vector<std::pair<std::string, double*>>& keys) {
  std::string expected;
  for (const auto& [key, out] : keys) {
    absl::StrAppend(&expected, expected.empty() ? "" : ", ", key);
  }
  for (const auto& [key, value] : options) {
    bool known = false;
    for (const auto& [name, out] : keys) known |= name == key;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer state's parameter group ", g, " has the unknown key \"",
          key, "\" (expected lr and ", expected,
          "); the state must come from an optimizer of the same kind"));
    }
  }
  for (const auto& [key, out] : keys) {
    auto it = options.find(key);
    if (it == options.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer state's parameter group ", g, " lacks \"",
                       key, "\" (expected lr and ", expected, ")"));
    }
    *out = it->second;
  }
  return absl::OkStatus();
}

size_t Optimizer::GroupOf(size_t i) const {
  size_t g = 0;
  while (g + 1 < groups_.size() && i >= groups_[g].end) ++g;
  return g;
}

std::vector<ParamGroupState> Optimizer::ExportParamGroups() const {
  std::vector<ParamGroupState> out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroupState state;
    for (size_t i = groups_[g].begin; i < groups_[g].end; ++i) {
      state.params.push_back(static_cast<int64_t>(i));
    }
    state.options = GroupOptions(g);
    state.options["lr"] = groups_[g].lr;
    out.push_back(std::move(state));
  }
  return out;
}

absl::Status Optimizer::ImportParamGroups(
    const std::vector<ParamGroupState>& groups) {
  if (groups.size() != groups_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state has ", groups.size(),
        " parameter group(s) but the optimizer has ", groups_.size(),
        "; build the optimizer with the same groups as the saved one"));
  }
  std::vector<std::map<std::string, double>> options;
  std::vector<double> lrs;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& mine = groups_[g];
    const std::vector<int64_t>& saved = groups[g].params;
    bool same = saved.size() == mine.end - mine.begin;
    for (size_t k = 0; same && k < saved.size(); ++k) {
      same = saved[k] == static_cast<int64_t>(mine.begin + k);
    }
    if (!same) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer state's parameter group ", g, " holds ", saved.size(),
          " parameter(s) but this optimizer's group ", g, " holds parameters ",
          mine.begin, "..", mine.end,
          " (exclusive); build the optimizer with the same groups in the "
          "same order as the saved one"));
    }
    std::map<std::string, double> o = groups[g].options;
    auto lr = o.find("lr");
    if (lr == o.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer state's parameter group ", g, " has no \"lr\""));
    }
    TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
        absl::StrCat("parameter group ", g), "learning rate", "lr", lr->second,
        lr->second >= 0, ">= 0"));
    lrs.push_back(lr->second);
    o.erase(lr);
    options.push_back(std::move(o));
  }
  TANDEM_RETURN_IF_ERROR(SetGroupOptions(options));
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].lr = lrs[g];
  return absl::OkStatus();
}

absl::Status Optimizer::ValidateParams(std::string_view who,
                                       const std::vector<Tensor>& params) {
  const std::string name(who);
  if (params.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        ": got an empty parameter list; pass the model's Parameters() after "
        "building it"));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (!p.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": parameter ", i, " is an undefined tensor"));
    }
    if (p.dtype() != DType::kF32 && p.dtype() != DType::kF64) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": parameter ", i, " is ", Describe(p),
                       "; only f32 and f64 parameters are supported"));
    }
    if (!p.is_leaf()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": can't optimize parameter ", i, " (", Describe(p),
          "), which is not a leaf but the output of ", p.grad_fn_name(),
          "; optimize the leaf tensors (e.g. a Module's Parameters())"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (params[j].impl() == p.impl()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": parameter ", i, " is the same tensor as parameter ", j,
            "; list each parameter once"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Optimizer::CheckStepable(std::string_view who, size_t i) const {
  const Tensor& p = params_[i];
  const Tensor g = p.grad();
  if (g.dtype() != p.dtype() || g.numel() != p.numel() ||
      g.device() != p.device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(who), "::Step: parameter ", i, " is ", Describe(p),
        " but its gradient is ", Describe(g), " on ", g.device().ToString(),
        "; a gradient must match its parameter"));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::ParseStateName(std::string_view who,
                                       const std::string& name, size_t& index,
                                       std::string& key) const {
  const size_t dot = name.find('.');
  size_t value = 0;
  bool ok = dot != std::string::npos && dot > 0 && dot + 1 < name.size();
  for (size_t j = 0; ok && j < dot; ++j) {
    if (name[j] < '0' || name[j] > '9' || value > params_.size()) {
      ok = false;
    } else {
      value = value * 10 + static_cast<size_t>(name[j] - '0');
    }
  }
  if (!ok || value >= params_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(who), ": optimizer state entry \"", name,
        "\" is not \"<parameter index>.<key>\" with an index below ",
        params_.size(),
        " (the parameter count); the state must come from an optimizer over "
        "the same parameters"));
  }
  index = value;
  key = name.substr(dot + 1);
  return absl::OkStatus();
}

absl::StatusOr<Tensor> Optimizer::StateLike(std::string_view who,
                                            const std::string& name,
                                            const Tensor& t, size_t i) const {
  const Tensor& p = params_[i];
  if (!t.defined() || t.shape() != p.shape() || t.dtype() != p.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(who), ": optimizer state entry \"", name, "\" has ",
        t.defined()
            ? absl::StrCat(ShapeToString(t.shape()), " ", DTypeName(t.dtype()))
            : std::string("no tensor"),
        " but parameter ", i, " is ", ShapeToString(p.shape()), " ",
        DTypeName(p.dtype()),
        "; the state must come from an optimizer over the same parameters"));
  }
  Tensor copy;
  if (t.device() == p.device()) {
    TANDEM_ASSIGN_OR_RETURN(copy, t.Clone());
  } else {
    TANDEM_ASSIGN_OR_RETURN(copy, t.To(p.device()));
  }
  return copy.Detach();
}

}  // namespace tandem::optim
