// Losses: CrossEntropy (from logits; ignore_index, mean or sum) and Mse
// (mean).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/pytorch_math/softmax_kernels.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {

using internal::Describe;
using internal::DispatchFloat;

namespace {

// CrossEntropy with ignore_index and reduction: a row is counted when its
// label is not options.ignore_index; ignored rows add nothing and get a
// zero gradient. kMean divides by the count (0: NaN, as PyTorch), kSum by
// nothing.

// The CPU kernels. CrossEntropy's `saved` holds, for its backward, the
// log-probabilities (f32: PyTorch's cross_entropy is log_softmax, then
// nll_loss, and backward through both, each in PyTorch's order
// (softmax_kernels.h), so the loss and the gradient equal PyTorch's bit for
// bit) or the probabilities (f64: softmax(logits) - onehot(labels), times
// g / count (mean) or g (sum), is the gradient of a counted row). Shapes and
// dtypes are checked by CrossEntropy; the labels' values are checked here,
// where they are read.
absl::Status CpuCrossEntropy(const Tensor& logits, const Tensor& labels,
                             const CrossEntropyOptions& options,
                             const Tensor& loss, const Tensor& saved,
                             int64_t* counted_out) {
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const int64_t ignore = options.ignore_index;
  const bool mean = options.reduction == LossReduction::kMean;
  const int64_t* pl = labels.data<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (pl[i] == ignore) continue;
    if (pl[i] < 0 || pl[i] >= c) {
      return internal::LabelOutOfRange(logits, i, pl[i]);
    }
    ++counted;
  }
  *counted_out = counted;
  if (logits.dtype() == DType::kF32) {
    internal::LogSoftmaxRows(logits.data<float>(), n, c, saved.data<float>());
    loss.data<float>()[0] =
        internal::NllLoss(saved.data<float>(), pl, n, c, ignore, mean);
    return absl::OkStatus();
  }
  using T = double;
  const T* px = logits.data<T>();
  T* pp = saved.data<T>();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (pl[i] == ignore) continue;
    const T* row = px + i * c;
    T* prow = pp + i * c;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t k = 0; k < c; ++k) mx = std::max(mx, row[k]);
    T sum = 0;
    for (int64_t k = 0; k < c; ++k) {
      prow[k] = std::exp(row[k] - mx);
      sum += prow[k];
    }
    for (int64_t k = 0; k < c; ++k) prow[k] /= sum;
    // -log softmax[label] = logsumexp - x[label]
    total += static_cast<double>(mx + std::log(sum) - row[pl[i]]);
  }
  loss.data<T>()[0] =
      static_cast<T>(mean ? total / static_cast<double>(counted) : total);
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(CrossEntropyKernels(), DeviceType::kCPU,
                       CpuCrossEntropy);

absl::Status CpuCrossEntropyBackward(const Tensor& g, const Tensor& saved,
                                     const Tensor& labels,
                                     const CrossEntropyOptions& options,
                                     int64_t counted, const GradOut& out) {
  const int64_t n = saved.dim(0), c = saved.dim(1);
  const int64_t ignore = options.ignore_index;
  const bool mean = options.reduction == LossReduction::kMean;
  const int64_t* pl = labels.data<int64_t>();
  if (g.dtype() == DType::kF32) {
    // nll_loss backward: -(g / count) (mean) or -g (sum) at each counted
    // label, 0 elsewhere; then log_softmax's backward.
    std::vector<float> glogp(static_cast<size_t>(n * c), 0.0f);
    const float g0 = g.data<float>()[0];
    const float at_label = -(mean ? g0 / static_cast<float>(counted) : g0);
    for (int64_t i = 0; i < n; ++i) {
      if (pl[i] != ignore) glogp[i * c + pl[i]] = at_label;
    }
    std::vector<float> gx(glogp.size());
    internal::LogSoftmaxBackwardRows(glogp.data(), saved.data<float>(), n, c,
                                     gx.data());
    float* po = out.tensor.data<float>();
    for (size_t j = 0; j < gx.size(); ++j) {
      po[j] = out.accumulate ? po[j] + gx[j] : gx[j];
    }
    return absl::OkStatus();
  }
  using T = double;
  const T scale =
      mean ? g.data<T>()[0] / static_cast<T>(counted) : g.data<T>()[0];
  const T* pp = saved.data<T>();
  T* po = out.tensor.data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const bool skip = pl[i] == ignore;
    for (int64_t k = 0; k < c; ++k) {
      const int64_t j = i * c + k;
      const T v = skip ? T(0) : scale * (pp[j] - (k == pl[i] ? T(1) : T(0)));
      po[j] = out.accumulate ? po[j] + v : v;
    }
  }
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(CrossEntropyBackwardKernels(), DeviceType::kCPU,
                       CpuCrossEntropyBackward);

absl::Status CpuMse(const Tensor& prediction, const Tensor& target,
                    const Tensor& loss) {
  const int64_t n = prediction.numel();
  DispatchFloat(prediction.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pp = prediction.data<T>();
    const T* pt = target.data<T>();
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(pp[i]) - static_cast<double>(pt[i]);
      total += d * d;
    }
    loss.data<T>()[0] = static_cast<T>(total / static_cast<double>(n));
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(MseKernels(), DeviceType::kCPU, CpuMse);

absl::Status CpuMseBackward(const Tensor& g, const Tensor& prediction,
                            const Tensor& target, bool negate,
                            const GradOut& out) {
  const int64_t n = prediction.numel();
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    // d/dp = 2 (p - t) / n; d/dt = -that.
    const T scale = T(2) * g.data<T>()[0] / static_cast<T>(n);
    const T* pp = prediction.data<T>();
    const T* pt = target.data<T>();
    const T sign = negate ? T(-1) : T(1);
    T* po = out.tensor.data<T>();
    for (int64_t k = 0; k < n; ++k) {
      const T v = sign * scale * (pp[k] - pt[k]);
      po[k] = out.accumulate ? po[k] + v : v;
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(MseBackwardKernels(), DeviceType::kCPU, CpuMseBackward);

}  // namespace

absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits,
                                    const Tensor& labels) {
  return CrossEntropy(logits, labels, CrossEntropyOptions());
}

absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits, const Tensor& labels,
                                    const CrossEntropyOptions& options) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kCrossEntropy, {logits, labels},
          [&](const std::vector<Tensor>& in) {
            return CrossEntropy(in[0], in[1], options);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("CrossEntropy", logits, labels));
  TANDEM_RETURN_IF_ERROR(
      internal::CheckFloat(logits, "CrossEntropy", "logits"));
  TANDEM_RETURN_IF_ERROR(
      internal::CheckDefined(labels, "CrossEntropy", "labels"));
  if (logits.ndim() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CrossEntropy: logits must be [N, C], got ", Describe(logits)));
  }
  if (labels.dtype() != DType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CrossEntropy: labels must be i64 class indices, got ",
        Describe(labels),
        (IsFloatingPoint(labels.dtype())
             ? "; float labels (probabilities or one-hot) are not supported, "
               "pass class indices converted with To(DType::kI64)"
             : "; convert with To(DType::kI64)")));
  }
  const int64_t n = logits.dim(0);
  if (labels.shape() != Shape{n}) {
    return absl::InvalidArgumentError(
        absl::StrCat("CrossEntropy: labels ", Describe(labels), " must be [", n,
                     "] to match logits ", Describe(logits)));
  }
  TANDEM_ASSIGN_OR_RETURN(CrossEntropyKernel * kernel,
                          CrossEntropyKernels().For(device));
  if (options.reduction != LossReduction::kMean &&
      options.reduction != LossReduction::kSum) {
    return absl::InvalidArgumentError(
        absl::StrCat("CrossEntropy: reduction must be kMean or kSum, got ",
                     static_cast<int>(options.reduction)));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                          Tensor::Empty({}, logits.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor saved, Tensor::Empty(logits.shape(), logits.dtype(), device));
  int64_t counted = 0;
  TANDEM_RETURN_IF_ERROR(
      kernel(logits, labels, options, loss, saved, &counted));
  if (ShouldRecord({logits})) {
    // The one backward formula: CrossEntropyBackward from what the forward
    // kernel saved; ignored rows get a zero gradient.
    RecordOp("CrossEntropy", loss, {logits, labels},
             [saved, labels = labels.Detach(), options, counted, device](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_RETURN_IF_ERROR(
                   internal::CheckGradDevice(g, device, "CrossEntropy"));
               TANDEM_ASSIGN_OR_RETURN(
                   CrossEntropyBackwardKernel * backward,
                   CrossEntropyBackwardKernels().For(device));
               TANDEM_ASSIGN_OR_RETURN(GradOut out, sink.GetBuffer(0));
               return backward(g, saved, labels, options, counted, out);
             });
  }
  return loss;
}

absl::StatusOr<Tensor> Mse(const Tensor& prediction, const Tensor& target) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kMse, {prediction, target},
          [&](const std::vector<Tensor>& in) { return Mse(in[0], in[1]); })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("Mse", prediction, target));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(prediction, "Mse", "prediction"));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(target, "Mse", "target"));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(prediction, target, "Mse"));
  if (prediction.shape() != target.shape()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Mse: prediction ", Describe(prediction), " and target ",
                     Describe(target), " must have the same shape"));
  }
  TANDEM_ASSIGN_OR_RETURN(MseKernel * kernel, MseKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                          Tensor::Empty({}, prediction.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(prediction, target, loss));
  if (ShouldRecord({prediction, target})) {
    // The one backward formula: 2 (p - t) / n * g for the prediction, its
    // negation for the target, one input at a time (Mse(p, p) gets both).
    RecordOp(
        "Mse", loss, {prediction, target},
        [sp = prediction.Detach(), st = target.Detach(), device](
            const Tensor& g, GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(internal::CheckGradDevice(g, device, "Mse"));
          TANDEM_ASSIGN_OR_RETURN(MseBackwardKernel * backward,
                                  MseBackwardKernels().For(device));
          for (int i = 0; i < 2; ++i) {
            if (!sink.needs(i)) continue;
            TANDEM_ASSIGN_OR_RETURN(GradOut out, sink.GetBuffer(i));
            TANDEM_RETURN_IF_ERROR(backward(g, sp, st, /*negate=*/i == 1, out));
          }
          return absl::OkStatus();
        });
  }
  return loss;
}

}  // namespace tandem
