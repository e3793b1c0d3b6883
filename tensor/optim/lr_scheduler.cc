#include "tensor/optim/lr_scheduler.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace tandem::optim {
namespace {

constexpr double kPi = std::numbers::pi;

absl::Status NullOptimizer(const char* who) {
  return absl::InvalidArgumentError(
      absl::StrCat(who,
                   ": the optimizer is null; pass the optimizer whose "
                   "learning rates the schedule sets"));
}

std::string JoinDoubles(const std::vector<double>& values) {
  std::string out;
  for (double v : values) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", v);
    absl::StrAppend(&out, out.empty() ? "" : ",", text);
  }
  return out;
}

absl::StatusOr<std::vector<double>> SplitDoubles(
    const std::map<std::string, std::string>& state, const std::string& key,
    size_t groups) {
  auto it = state.find(key);
  std::vector<double> out;
  bool ok = it != state.end();
  if (ok) {
    for (const absl::string_view piece : absl::StrSplit(it->second, ',')) {
      double v = 0;
      ok = ok && absl::SimpleAtod(piece, &v) && std::isfinite(v) && v >= 0;
      out.push_back(v);
    }
  }
  if (!ok || out.size() != groups) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lr scheduler state: entry \"", key,
        "\" is missing or not a comma-separated list of ", groups,
        " finite rates >= 0 (one per parameter group of the optimizer); the "
        "state must come from a scheduler of an optimizer with the same "
        "groups"));
  }
  return out;
}

}  // namespace

LrScheduler::LrScheduler(Optimizer* optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer->num_param_groups(); ++g) {
    base_lrs_.push_back(optimizer->lr(g));
  }
}

absl::Status LrScheduler::Step() {
  ++last_epoch_;
  const std::vector<double> next = ComputeLr();
  for (size_t g = 0; g < next.size(); ++g) {
    if (!std::isfinite(next[g]) || next[g] < 0) {
      --last_epoch_;
      return absl::InvalidArgumentError(absl::StrCat(
          "lr scheduler: epoch ", last_epoch_ + 1, " gives parameter group ", g,
          " the learning rate ", next[g],
          "; a rate must be finite and >= 0: check the schedule's factor"));
    }
  }
  for (size_t g = 0; g < next.size(); ++g) {
    TANDEM_RETURN_IF_ERROR(optimizer_->set_lr(g, next[g]));
  }
  last_lr_ = next;
  return absl::OkStatus();
}

std::map<std::string, std::string> LrScheduler::StateDict() const {
  return {{"last_epoch", absl::StrCat(last_epoch_)},
          {"base_lrs", JoinDoubles(base_lrs_)},
          {"last_lr", JoinDoubles(last_lr_)}};
}

absl::Status LrScheduler::LoadStateDict(
    const std::map<std::string, std::string>& state) {
  const size_t groups = optimizer_->num_param_groups();
  auto epoch = state.find("last_epoch");
  int64_t last_epoch = -1;
  if (epoch == state.end() || !absl::SimpleAtoi(epoch->second, &last_epoch) ||
      last_epoch < 0) {
    return absl::InvalidArgumentError(
        "lr scheduler state: entry \"last_epoch\" is missing or not an "
        "integer >= 0; pass a StateDict() of a started scheduler");
  }
  TANDEM_ASSIGN_OR_RETURN(std::vector<double> base_lrs,
                          SplitDoubles(state, "base_lrs", groups));
  TANDEM_ASSIGN_OR_RETURN(std::vector<double> last_lr,
                          SplitDoubles(state, "last_lr", groups));
  for (size_t g = 0; g < groups; ++g) {
    TANDEM_RETURN_IF_ERROR(optimizer_->set_lr(g, last_lr[g]));
  }
  last_epoch_ = last_epoch;
  base_lrs_ = std::move(base_lrs);
  last_lr_ = std::move(last_lr);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StepLR>> StepLR::Create(Optimizer* optimizer,
                                                       int64_t step_size,
                                                       double gamma) {
  if (optimizer == nullptr) return NullOptimizer("StepLR");
  if (step_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StepLR: step_size is ", step_size, "; pass a step_size >= 1"));
  }
  TANDEM_RETURN_IF_ERROR(Optimizer::CheckHyperParameter(
      "StepLR", "gamma", "gamma", gamma, gamma >= 0, ">= 0"));
  std::unique_ptr<StepLR> s(new StepLR(optimizer, step_size, gamma));
  TANDEM_RETURN_IF_ERROR(s->Start());
  return s;
}

std::vector<double> StepLR::ComputeLr() const {
  std::vector<double> out;
  const bool decay = last_epoch() != 0 && last_epoch() % step_size_ == 0;
  for (size_t g = 0; g < base_lrs().size(); ++g) {
    const double lr = optimizer_->lr(g);
    out.push_back(decay ? lr * gamma_ : lr);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<CosineAnnealingLR>> CosineAnnealingLR::Create(
    Optimizer* optimizer, int64_t t_max, double eta_min) {
  if (optimizer == nullptr) return NullOptimizer("CosineAnnealingLR");
  if (t_max < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CosineAnnealingLR: T_max is ", t_max, "; pass a T_max >= 1"));
  }
  TANDEM_RETURN_IF_ERROR(
      Optimizer::CheckHyperParameter("CosineAnnealingLR", "eta_min", "eta_min",
                                     eta_min, eta_min >= 0, ">= 0"));
  std::unique_ptr<CosineAnnealingLR> s(
      new CosineAnnealingLR(optimizer, t_max, eta_min));
  TANDEM_RETURN_IF_ERROR(s->Start());
  return s;
}

// PyTorch 1.13's CosineAnnealingLR.get_lr, term by term (Python evaluates
// left to right: pi * e / T is (pi * e) / T).
std::vector<double> CosineAnnealingLR::ComputeLr() const {
  const int64_t e = last_epoch();
  const double t = static_cast<double>(t_max_);
  std::vector<double> out;
  for (size_t g = 0; g < base_lrs().size(); ++g) {
    const double lr = optimizer_->lr(g);
    if (e == 0) {
      out.push_back(lr);
    } else if ((e - 1 - t_max_) % (2 * t_max_) == 0) {
      out.push_back(lr +
                    (base_lrs()[g] - eta_min_) * (1 - std::cos(kPi / t)) / 2);
    } else {
      const double ed = static_cast<double>(e);
      const double num = 1 + std::cos(kPi * ed / t);
      const double den = 1 + std::cos(kPi * (ed - 1) / t);
      out.push_back(num / den * (lr - eta_min_) + eta_min_);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LambdaLR>> LambdaLR::Create(Optimizer* optimizer,
                                                           Factor factor) {
  if (optimizer == nullptr) return NullOptimizer("LambdaLR");
  return Create(optimizer, std::vector<Factor>(optimizer->num_param_groups(),
                                               std::move(factor)));
}

absl::StatusOr<std::unique_ptr<LambdaLR>> LambdaLR::Create(
    Optimizer* optimizer, std::vector<Factor> factors) {
  if (optimizer == nullptr) return NullOptimizer("LambdaLR");
  if (factors.size() != optimizer->num_param_groups()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LambdaLR: got ", factors.size(), " factor functions for ",
                     optimizer->num_param_groups(),
                     " parameter groups; pass one function, or one per group"));
  }
  for (size_t g = 0; g < factors.size(); ++g) {
    if (!factors[g]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LambdaLR: the factor function of group ", g, " is empty"));
    }
  }
  std::unique_ptr<LambdaLR> s(new LambdaLR(optimizer, std::move(factors)));
  TANDEM_RETURN_IF_ERROR(s->Start());
  return s;
}

std::vector<double> LambdaLR::ComputeLr() const {
  std::vector<double> out;
  for (size_t g = 0; g < base_lrs().size(); ++g) {
    out.push_back(base_lrs()[g] * factors_[g](last_epoch()));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<WarmupCosineLR>> WarmupCosineLR::Create(
    Optimizer* optimizer, WarmupCosineOptions options) {
  if (optimizer == nullptr) return NullOptimizer("WarmupCosineLR");
  if (options.warmup_iters < 0 ||
      options.lr_decay_iters <= options.warmup_iters) {
    return absl::InvalidArgumentError(
        absl::StrCat("WarmupCosineLR: warmup_iters is ", options.warmup_iters,
                     " and lr_decay_iters ", options.lr_decay_iters,
                     "; pass 0 <= warmup_iters < lr_decay_iters"));
  }
  TANDEM_RETURN_IF_ERROR(Optimizer::CheckHyperParameter(
      "WarmupCosineLR", "min_lr", "min_lr", options.min_lr, options.min_lr >= 0,
      ">= 0"));
  std::unique_ptr<WarmupCosineLR> s(new WarmupCosineLR(optimizer, options));
  TANDEM_RETURN_IF_ERROR(s->Start());
  return s;
}

// nanoGPT's get_lr, in its operation order.
double WarmupCosineLR::Rate(const WarmupCosineOptions& o, double lr,
                            int64_t it) {
  if (it < o.warmup_iters) {
    return lr * static_cast<double>(it + 1) /
           static_cast<double>(o.warmup_iters);
  }
  if (it > o.lr_decay_iters) return o.min_lr;
  const double decay_ratio =
      static_cast<double>(it - o.warmup_iters) /
      static_cast<double>(o.lr_decay_iters - o.warmup_iters);
  const double coeff = 0.5 * (1.0 + std::cos(kPi * decay_ratio));
  return o.min_lr + coeff * (lr - o.min_lr);
}

std::vector<double> WarmupCosineLR::ComputeLr() const {
  std::vector<double> out;
  for (double base : base_lrs()) {
    out.push_back(Rate(options_, base, last_epoch()));
  }
  return out;
}

}  // namespace tandem::optim
