#include "tensor/optim/clip_grad.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/ops.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

template <typename T>
double Part(const T* g, int64_t n, double p) {
  double acc = 0;
  if (std::isinf(p)) {
    for (int64_t i = 0; i < n; ++i) {
      const double a = std::abs(static_cast<double>(g[i]));
      if (std::isnan(a)) return a;  // NaN propagates, as torch's max does
      acc = std::max(acc, a);
    }
  } else if (p == 2) {
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(g[i]);
      acc += v * v;
    }
  } else if (p == 1) {
    for (int64_t i = 0; i < n; ++i) acc += std::abs(static_cast<double>(g[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) {
      acc += std::pow(std::abs(static_cast<double>(g[i])), p);
    }
  }
  return acc;
}

// clip_coef in T: PyTorch's clamp(reciprocal(total + 1e-6) * max_norm,
// max=1) on a T scalar.
template <typename T>
double ClipCoef(double max_norm, double total) {
  const T denom = static_cast<T>(total) + static_cast<T>(1e-6);
  const T coef = (static_cast<T>(1) / denom) * static_cast<T>(max_norm);
  // torch.clamp keeps NaN.
  return static_cast<double>(coef > static_cast<T>(1) ? static_cast<T>(1)
                                                      : coef);
}

}  // namespace

std::vector<Tensor> GradsOf(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    if (p.defined() && p.has_grad()) grads.push_back(p.grad());
  }
  return grads;
}

absl::Status CheckClipArguments(double max_norm,
                                const ClipGradNormOptions& options) {
  TANDEM_RETURN_IF_ERROR(Optimizer::CheckHyperParameter(
      "ClipGradNorm", "max_norm", "max_norm", max_norm, max_norm >= 0, ">= 0"));
  const double p = options.norm_type;
  if (!(p > 0)) {  // NaN too
    return absl::InvalidArgumentError(absl::StrCat(
        "ClipGradNorm: norm_type is ", p,
        "; pass a norm_type > 0 (2 for the Euclidean norm) or infinity"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> GradNormPart(const std::vector<Tensor>& grads,
                                    double norm_type) {
  double total = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    Tensor g = grads[i];
    if (g.dtype() != DType::kF32 && g.dtype() != DType::kF64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ClipGradNorm: gradient ", i, " is ", DTypeName(g.dtype()),
          "; only f32 and f64 gradients can be clipped (under AMP, clip "
          "the f32 master gradients after GradScaler::Unscale)"));
    }
    if (!g.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(g, g.To(Device::CPU()));
    }
    const double part = g.dtype() == DType::kF32
                            ? Part(g.data<float>(), g.numel(), norm_type)
                            : Part(g.data<double>(), g.numel(), norm_type);
    if (std::isinf(norm_type)) {
      total = std::isnan(total) || std::isnan(part) ? std::nan("")
                                                    : std::max(total, part);
    } else {
      total += part;
    }
  }
  return total;
}

double TotalNormFromPart(double part, double norm_type) {
  if (std::isinf(norm_type) || norm_type == 1) return part;
  if (norm_type == 2) return std::sqrt(part);
  return std::pow(part, 1.0 / norm_type);
}

absl::Status ScaleGradsToNorm(const std::vector<Tensor>& grads, double max_norm,
                              double total,
                              const ClipGradNormOptions& options) {
  if (options.error_if_nonfinite && !std::isfinite(total)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClipGradNorm: the total norm of order ", options.norm_type,
        " of the gradients is ", total,
        ", so they cannot be clipped; with error_if_nonfinite = false they "
        "are scaled anyway (as PyTorch 1.13's default)"));
  }
  bool any_f64 = false;
  for (const Tensor& g : grads) any_f64 |= g.dtype() == DType::kF64;
  const double coef = any_f64 ? ClipCoef<double>(max_norm, total)
                              : ClipCoef<float>(max_norm, total);
  for (const Tensor& g : grads) {
    TANDEM_RETURN_IF_ERROR(ScaleInPlace(g, coef));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ClipGradNorm(const std::vector<Tensor>& parameters,
                                    double max_norm,
                                    const ClipGradNormOptions& options) {
  TANDEM_RETURN_IF_ERROR(CheckClipArguments(max_norm, options));
  const std::vector<Tensor> grads = GradsOf(parameters);
  if (grads.empty()) return 0.0;
  TANDEM_ASSIGN_OR_RETURN(const double part,
                          GradNormPart(grads, options.norm_type));
  const double total = TotalNormFromPart(part, options.norm_type);
  TANDEM_RETURN_IF_ERROR(ScaleGradsToNorm(grads, max_norm, total, options));
  return total;
}

}  // namespace tandem::optim
