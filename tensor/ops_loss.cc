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
#include "tensor/autograd.h"
#include "tensor/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops_internal.h"
#include "tensor/softmax_kernels.h"

namespace tandem {

using internal::Describe;
using internal::DispatchFloat;

namespace {

// ---- CrossEntropy with ignore_index and reduction (GPT ops, helper
// gptops). A row is counted when its label is not options.ignore_index;
// ignored rows add nothing and get a zero gradient. kMean divides by the
// count (0: NaN, as PyTorch), kSum by nothing.

// PyTorch's cross_entropy on f32: log_softmax, then nll_loss, and backward
// through both, each in PyTorch's order (softmax_kernels.h), so the loss
// and the gradient equal PyTorch's bit for bit. Shapes and labels are
// checked by the caller.
absl::StatusOr<Tensor> CrossEntropyF32(const Tensor& logits,
                                       const Tensor& labels,
                                       const CrossEntropyOptions& options,
                                       int64_t counted) {
  const int64_t n = logits.dim(0), c = logits.dim(1);
  const bool mean = options.reduction == LossReduction::kMean;
  const int64_t ignore = options.ignore_index;
  TANDEM_ASSIGN_OR_RETURN(Tensor loss, internal::NewLike({}, DType::kF32));
  TANDEM_ASSIGN_OR_RETURN(Tensor logp,
                          internal::NewLike(logits.shape(), DType::kF32));
  internal::LogSoftmaxRows(logits.data<float>(), n, c, logp.data<float>());
  loss.data<float>()[0] = internal::NllLoss(
      logp.data<float>(), labels.data<int64_t>(), n, c, ignore, mean);
  RecordOp("CrossEntropy", loss, {logits, labels},
           [logp, labels, n, c, mean, ignore, counted](
               const Tensor& g, GradSink& sink) -> absl::Status {
             TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
             // nll_loss backward: -(g / count) (mean) or -g (sum) at each
             // counted label, 0 elsewhere.
             std::vector<float> glogp(static_cast<size_t>(n * c), 0.0f);
             const float g0 = g.data<float>()[0];
             const float at_label =
                 -(mean ? g0 / static_cast<float>(counted) : g0);
             const int64_t* pl = labels.data<int64_t>();
             for (int64_t i = 0; i < n; ++i) {
               if (pl[i] != ignore) glogp[i * c + pl[i]] = at_label;
             }
             std::vector<float> gx(glogp.size());
             internal::LogSoftmaxBackwardRows(glogp.data(), logp.data<float>(),
                                              n, c, gx.data());
             float* out = buf.tensor.data<float>();
             for (size_t j = 0; j < gx.size(); ++j) {
               out[j] = buf.accumulate ? out[j] + gx[j] : gx[j];
             }
             return absl::OkStatus();
           });
  return loss;
}

// The CPU kernel: shapes and dtypes checked by CrossEntropy; the labels'
// values are checked here, where they are read.
absl::StatusOr<Tensor> CpuCrossEntropy(const Tensor& logits,
                                       const Tensor& labels,
                                       const CrossEntropyOptions& options) {
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
  if (logits.dtype() == DType::kF32) {
    return CrossEntropyF32(logits, labels, options, counted);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor loss, internal::NewLike({}, logits.dtype()));
  // softmax(logits) - onehot(labels), times g / count (mean) or g (sum), is
  // the gradient of a counted row; the probabilities are kept for backward.
  TANDEM_ASSIGN_OR_RETURN(Tensor probs,
                          internal::NewLike(logits.shape(), logits.dtype()));
  DispatchFloat(logits.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = logits.data<T>();
    T* pp = probs.data<T>();
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
  });
  RecordOp("CrossEntropy", loss, {logits, labels},
           [probs, labels, n, c, mean, ignore, counted](
               const Tensor& g, GradSink& sink) -> absl::Status {
             TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
             DispatchFloat(g.dtype(), [&](auto zero) {
               using T = decltype(zero);
               const T scale = mean ? g.data<T>()[0] / static_cast<T>(counted)
                                    : g.data<T>()[0];
               const T* pp = probs.data<T>();
               const int64_t* pl = labels.data<int64_t>();
               T* out = buf.tensor.data<T>();
               for (int64_t i = 0; i < n; ++i) {
                 const bool skip = pl[i] == ignore;
                 for (int64_t k = 0; k < c; ++k) {
                   const int64_t j = i * c + k;
                   const T v =
                       skip ? T(0)
                            : scale * (pp[j] - (k == pl[i] ? T(1) : T(0)));
                   out[j] = buf.accumulate ? out[j] + v : v;
                 }
               }
             });
             return absl::OkStatus();
           });
  return loss;
}
// ---- end CrossEntropy (GPT ops).

TANDEM_REGISTER_KERNEL(CrossEntropyKernels(), DeviceType::kCPU,
                       CpuCrossEntropy);

absl::StatusOr<Tensor> CpuMse(const Tensor& prediction, const Tensor& target) {
  const int64_t n = prediction.numel();
  TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                          internal::NewLike({}, prediction.dtype()));
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
  if (ShouldRecord({prediction, target})) {
    RecordOp("Mse", loss, {prediction, target},
             [sp = prediction.Detach(), st = target.Detach(), n](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               return DispatchFloat(g.dtype(), [&](auto zero) -> absl::Status {
                 using T = decltype(zero);
                 // d/dp = 2 (p - t) / n; d/dt = -that.
                 const T scale = T(2) * g.data<T>()[0] / static_cast<T>(n);
                 const T* pp = sp.data<T>();
                 const T* pt = st.data<T>();
                 for (int i = 0; i < 2; ++i) {
                   if (!sink.needs(i)) continue;
                   TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf,
                                           sink.GetBuffer(i));
                   const T sign = i == 0 ? T(1) : T(-1);
                   T* out = buf.tensor.data<T>();
                   for (int64_t k = 0; k < n; ++k) {
                     const T v = sign * scale * (pp[k] - pt[k]);
                     out[k] = buf.accumulate ? out[k] + v : v;
                   }
                 }
                 return absl::OkStatus();
               });
             });
  }
  return loss;
}
TANDEM_REGISTER_KERNEL(MseKernels(), DeviceType::kCPU, CpuMse);

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
  return kernel(logits, labels, options);
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
  return kernel(prediction, target);
}

}  // namespace tandem
