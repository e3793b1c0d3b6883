#include "tensor/testing/gradcheck.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"

namespace tandem {
namespace {

// sum(w * f(inputs)) without autograd.
absl::StatusOr<double> WeightedOutput(const GradCheckFn& f,
                                      const std::vector<Tensor>& inputs,
                                      const std::vector<double>& w) {
  NoGradGuard no_grad;
  TANDEM_ASSIGN_OR_RETURN(Tensor out, f(inputs));
  TANDEM_ASSIGN_OR_RETURN(std::vector<double> v, out.ToVector<double>());
  double total = 0;
  for (size_t i = 0; i < v.size(); ++i) total += w[i] * v[i];
  return total;
}

}  // namespace

Tensor RandomTensor(const Shape& shape, std::mt19937& rng, double lo, double hi,
                    bool requires_grad) {
  Tensor t = Tensor::Empty(shape, DType::kF64).value();
  std::uniform_real_distribution<double> dist(lo, hi);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  if (requires_grad) t.set_requires_grad(true).IgnoreError();
  return t;
}

absl::Status GradCheck(const GradCheckFn& f, const std::vector<Tensor>& inputs,
                       const GradCheckOptions& options) {
  for (const Tensor& t : inputs) {
    if (t.requires_grad()) {
      TANDEM_RETURN_IF_ERROR(t.CheckAccess(DType::kF64, /*need_cpu=*/true));
      t.ClearGrad();
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor out, f(inputs));
  TANDEM_ASSIGN_OR_RETURN(out, out.To(DType::kF64));
  std::mt19937 rng(options.seed);
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  std::vector<double> w(out.numel());
  for (double& v : w) v = dist(rng);
  if (out.requires_grad()) {
    TANDEM_ASSIGN_OR_RETURN(Tensor seed, Tensor::FromVector(w, out.shape()));
    TANDEM_RETURN_IF_ERROR(out.Backward(seed));
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    const Tensor grad = x.grad();
    if (x.numel() > 0 && !grad.defined()) {
      return absl::InternalError(
          absl::StrCat("input ", k, " got no gradient from backward"));
    }
    double* px = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = px[i];
      px[i] = saved + options.eps;
      TANDEM_ASSIGN_OR_RETURN(double plus, WeightedOutput(f, inputs, w));
      px[i] = saved - options.eps;
      TANDEM_ASSIGN_OR_RETURN(double minus, WeightedOutput(f, inputs, w));
      px[i] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double analytic = grad.data<double>()[i];
      if (!(std::abs(numeric - analytic) <=
            options.atol + options.rtol * std::abs(numeric))) {
        return absl::InternalError(absl::StrCat(
            "gradient mismatch for input ", k, " ", ShapeToString(x.shape()),
            " at element ", i, ": autograd ", analytic, ", finite difference ",
            numeric));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem
