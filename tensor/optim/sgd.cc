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
#include "tensor/op_kernels.h"
#include "tensor/optim/update_kernels.h"
#include "tensor/tensor.h"

namespace tandem::optim {

absl::Status Sgd::CheckHyperParameters(double lr, const SgdOptions& options) {
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter("Sgd", "learning rate", "lr", lr, lr >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter("Sgd", "momentum value",
                                             "momentum", options.momentum,
                                             options.momentum >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
      "Sgd", "dampening value", "dampening", options.dampening, true, ""));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter(
      "Sgd", "weight_decay value", "weight_decay", options.weight_decay,
      options.weight_decay >= 0, ">= 0"));
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Sgd: Nesterov momentum requires a momentum and zero dampening, got "
        "momentum ",
        options.momentum, " and dampening ", options.dampening,
        ": pass momentum > 0 and dampening 0, or nesterov = false"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Sgd> Sgd::Create(std::vector<Tensor> params, double lr,
                                SgdOptions options) {
  TANDEM_RETURN_IF_ERROR(CheckHyperParameters(lr, options));
  TANDEM_RETURN_IF_ERROR(ValidateParams("Sgd", params));
  return Sgd(std::move(params), lr, options);
}

absl::Status Sgd::Step() {
  trace::Scope event("Sgd step", "optim");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    TANDEM_RETURN_IF_ERROR(CheckStepable("Sgd", i));
    const Tensor g = p.grad();
    bool first = false;
    if (options_.momentum != 0 && !buffers_[i].defined()) {
      TANDEM_ASSIGN_OR_RETURN(buffers_[i],
                              Tensor::Empty(p.shape(), p.dtype(), p.device()));
      first = true;
    }
    const bool use_buffer = options_.momentum != 0;
    if (!p.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(SgdStepKernel * step,
                              SgdStepKernels().For(p.device()));
      SgdStepArgs args;
      args.lr = lr_;
      args.momentum = options_.momentum;
      args.dampening = options_.dampening;
      args.weight_decay = options_.weight_decay;
      args.nesterov = options_.nesterov;
      args.maximize = options_.maximize;
      args.first = first;
      TANDEM_RETURN_IF_ERROR(
          step(p, g, use_buffer ? buffers_[i] : Tensor(), args));
      continue;
    }
    if (p.dtype() == DType::kF32) {
      internal::SgdUpdate<float>(
          p.data<float>(), g.data<float>(),
          use_buffer ? buffers_[i].data<float>() : nullptr, first, p.numel(),
          options_, lr_);
    } else {
      internal::SgdUpdate<double>(
          p.data<double>(), g.data<double>(),
          use_buffer ? buffers_[i].data<double>() : nullptr, first, p.numel(),
          options_, lr_);
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
