#include "tensor/optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/device_ops.h"
#include "tensor/ops.h"
#include "tensor/optim/update_kernels.h"
#include "tensor/tensor.h"

namespace tandem::optim {

absl::StatusOr<AdamW> AdamW::Create(std::vector<Tensor> params,
                                    AdamWOptions options) {
  const AdamWOptions& o = options;
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter("AdamW", "learning rate", "lr",
                                             o.lr, o.lr >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter("AdamW", "epsilon value", "eps",
                                             o.eps, o.eps >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter("AdamW", "beta parameter at index 0", "beta1",
                          o.beta1, o.beta1 >= 0 && o.beta1 < 1, "in [0, 1)"));
  TANDEM_RETURN_IF_ERROR(
      CheckHyperParameter("AdamW", "beta parameter at index 1", "beta2",
                          o.beta2, o.beta2 >= 0 && o.beta2 < 1, "in [0, 1)"));
  TANDEM_RETURN_IF_ERROR(CheckHyperParameter("AdamW", "weight_decay value",
                                             "weight_decay", o.weight_decay,
                                             o.weight_decay >= 0, ">= 0"));
  TANDEM_RETURN_IF_ERROR(ValidateParams("AdamW", params));
  return AdamW(std::move(params), options);
}

absl::Status AdamW::Step() {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.has_grad()) continue;
    TANDEM_RETURN_IF_ERROR(CheckStepable("AdamW", i));
    ParamState& st = state_[i];
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
    s.decay = 1 - lr_ * options_.weight_decay;
    s.step_size = lr_ / (1 - std::pow(options_.beta1, t));
    s.bias2_sqrt = std::sqrt(1 - std::pow(options_.beta2, t));
    const Tensor g = p.grad();
    if (!p.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(DeviceOps * dev, GetDeviceOps(p.device()));
      AdamWStepArgs args;
      args.beta1 = options_.beta1;
      args.beta2 = options_.beta2;
      args.eps = options_.eps;
      args.decay = s.decay;
      args.step_size = s.step_size;
      args.bias2_sqrt = s.bias2_sqrt;
      args.amsgrad = options_.amsgrad;
      args.maximize = options_.maximize;
      TANDEM_RETURN_IF_ERROR(dev->AdamWStep(p, g, st.exp_avg, st.exp_avg_sq,
                                            st.max_exp_avg_sq, args));
      continue;
    }
    if (p.dtype() == DType::kF32) {
      internal::AdamWUpdate<float>(
          p.data<float>(), g.data<float>(), st.exp_avg.data<float>(),
          st.exp_avg_sq.data<float>(),
          options_.amsgrad ? st.max_exp_avg_sq.data<float>() : nullptr,
          p.numel(), options_, s);
    } else {
      internal::AdamWUpdate<double>(
          p.data<double>(), g.data<double>(), st.exp_avg.data<double>(),
          st.exp_avg_sq.data<double>(),
          options_.amsgrad ? st.max_exp_avg_sq.data<double>() : nullptr,
          p.numel(), options_, s);
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::optim
