#include "tensor/optim/sgd.h"

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
#include "tensor/optim/update_kernels.h"
#include "tensor/tensor.h"

namespace tandem::optim {

absl::Status Sgd::CheckHyperParameters(double lr, const SgdOptions& options) {
  return CheckHyperParameters("Sgd", lr, options);
}

absl::Status Sgd::CheckHyperParameters(const std::string& who, double lr,
                                       const SgdOptions& options) {
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter(who, "learning rate", "lr", lr, lr >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(who, "momentum value", "momentum",
                                             options.momentum,
                                             options.momentum >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
      who, "dampening value", "dampening", options.dampening, true, ""));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
      who, "weight_decay value", "weight_decay", options.weight_decay,
      options.weight_decay >= 0, ">= 0"));
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        who,
        ": Nesterov momentum requires a momentum and zero dampening, got "
        "momentum ",
        options.momentum, " and dampening ", options.dampening,
        ": pass momentum > 0 and dampening 0, or nesterov = false"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Sgd> Sgd::Create(std::vector<Tensor> params, double lr,
                                SgdOptions options) {
  std::vector<SgdParamGroup> groups(1);
  groups[0].params = std::move(params);
  return Create(std::move(groups), lr, options);
}

absl::StatusOr<Sgd> Sgd::Create(std::vector<SgdParamGroup> groups, double lr,
                                SgdOptions defaults) {
  TANDEM_RETURN_IF_ERROR(CheckHyperParameters("Sgd", lr, defaults));
  if (groups.empty()) {
    return absl::InvalidArgumentError(
        "Sgd: got no parameter groups; pass at least one group");
  }
  std::vector<Tensor> params;
  std::vector<Group> ranges;
  std::vector<SgdOptions> options;
  for (size_t g = 0; g < groups.size(); ++g) {
    SgdParamGroup& group = groups[g];
    SgdOptions o = defaults;
    const double group_lr = group.lr.value_or(lr);
    o.momentum = group.momentum.value_or(o.momentum);
    o.dampening = group.dampening.value_or(o.dampening);
    o.weight_decay = group.weight_decay.value_or(o.weight_decay);
    TANDEM_RETURN_IF_ERROR(CheckHyperParameters(
        groups.size() > 1 ? absl::StrCat("Sgd parameter group ", g)
                          : std::string("Sgd"),
        group_lr, o));
    ranges.push_back(
        {params.size(), params.size() + group.params.size(), group_lr});
    for (Tensor& p : group.params) params.push_back(std::move(p));
    options.push_back(o);
  }
  TANDEM_RETURN_IF_ERROR(ValidateParams("Sgd", params));
  return Sgd(std::move(params), std::move(ranges), defaults,
             std::move(options));
}

std::map<std::string, double> Sgd::GroupOptions(size_t g) const {
  const SgdOptions& o = group_options_.at(g);
  return {{"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay}};
}

absl::Status Sgd::SetGroupOptions(
    const std::vector<std::map<std::string, double>>& options) {
  std::vector<SgdOptions> next = group_options_;
  for (size_t g = 0; g < next.size(); ++g) {
    SgdOptions& o = next[g];
    TANDEM_RETURN_IF_ERROR(
        ReadGroupOptions(g, options.at(g),
                         {{"momentum", &o.momentum},
                          {"dampening", &o.dampening},
                          {"weight_decay", &o.weight_decay}}));
    TANDEM_RETURN_IF_ERROR(CheckHyperParameters(
        absl::StrCat("Sgd parameter group ", g), groups_[g].lr, o));
  }
  group_options_ = std::move(next);
  return absl::OkStatus();
}

absl::Status Sgd::Step() {
  trace::Scope event("Sgd step", "optim");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    TANDEM_RETURN_IF_ERROR(CheckStepable("Sgd", i));
    const Tensor g = p.grad();
    const size_t group = GroupOf(i);
    const SgdOptions& o = group_options_[group];
    const double lr = groups_[group].lr;
    bool first = false;
    if (o.momentum != 0 && !buffers_[i].defined()) {
      TANDEM_ASSIGN_OR_RETURN(buffers_[i],
                              Tensor::Empty(p.shape(), p.dtype(), p.device()));
      first = true;
    }
    const bool use_buffer = o.momentum != 0;
    if (!p.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(SgdStepKernel * step,
                              SgdStepKernels().For(p.device()));
      SgdStepArgs args;
      args.lr = lr;
      args.momentum = o.momentum;
      args.dampening = o.dampening;
      args.weight_decay = o.weight_decay;
      args.nesterov = o.nesterov;
      args.maximize = o.maximize;
      args.first = first;
      TANDEM_RETURN_IF_ERROR(
          step(p, g, use_buffer ? buffers_[i] : Tensor(), args));
      continue;
    }
    if (p.dtype() == DType::kF32) {
      internal::SgdUpdate<float>(
          p.data<float>(), g.data<float>(),
          use_buffer ? buffers_[i].data<float>() : nullptr, first, p.numel(), o,
          lr);
    } else {
      internal::SgdUpdate<double>(
          p.data<double>(), g.data<double>(),
          use_buffer ? buffers_[i].data<double>() : nullptr, first, p.numel(),
          o, lr);
    }
  }
  return absl::OkStatus();
}

std::vector<StateEntry> Sgd::ExportState() const {
  std::vector<StateEntry> out;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (buffers_[i].defined()) {
      out.push_back({absl::StrCat(i, ".momentum_buffer"), buffers_[i]});
    }
  }
  return out;
}

absl::Status Sgd::ImportState(const std::vector<StateEntry>& state) {
  std::vector<Tensor> buffers(params_.size());
  for (const StateEntry& e : state) {
    size_t i = 0;
    std::string key;
    TANDEM_RETURN_IF_ERROR(ParseStateName("Sgd", e.name, i, key));
    if (key != "momentum_buffer" || buffers[i].defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sgd: optimizer state entry \"", e.name,
                       "\" is unknown or given twice (Sgd keeps only "
                       "\"<i>.momentum_buffer\")"));
    }
    TANDEM_ASSIGN_OR_RETURN(buffers[i], StateLike("Sgd", e.name, e.tensor, i));
  }
  buffers_ = std::move(buffers);
  return absl::OkStatus();
}

}  // namespace tandem::optim
