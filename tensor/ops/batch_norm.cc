// BatchNorm (tensor/ops.h) and its per-channel pieces
// (tensor/ops/batch_norm.h), defined the structured way
// (docs/adding_an_op.md): each checks its arguments once for every device
// and calls the kernels of the inputs' device (tensor/dispatch/op_kernels.h);
// the CPU kernels are here, CUDA's in tensor/cuda/ops/batch_norm.cc. The one
// autograd formula is BatchNorm's, written with the backward pieces.
//
// The CPU kernels follow PyTorch 1.13's contiguous CPU path
// (aten/src/ATen/native/cpu/batch_norm_kernel.cpp, Normalization.cpp):
// channel sums in double, squared deviations from the mean rounded to the
// dtype before they are summed, the output as x * a + b with per-channel
// a = invstd * weight and b = bias - mean * a in the dtype.
#include "tensor/ops/batch_norm.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/dispatch/op_table.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

// ---- CPU kernels (checked arguments; see tensor/dispatch/op_kernels.h). x [N,
// C,
// *] is split at dim 1 into (outer, size, inner) = (N, C, prod(*)):
// element (n, c, i) is at (n * C + c) * inner + i.

absl::Status CpuStats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const internal::DimSplit p = internal::SplitAt(x.shape(), 1);
  internal::DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xd = x.data<T>();
    const int64_t count = p.outer * p.inner;
    for (int64_t c = 0; c < p.size; ++c) {
      double sum = 0;
      for (int64_t n = 0; n < p.outer; ++n) {
        const T* plane = xd + (n * p.size + c) * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) sum += plane[i];
      }
      const T m = static_cast<T>(sum / static_cast<double>(count));
      double var_sum = 0;
      for (int64_t n = 0; n < p.outer; ++n) {
        const T* plane = xd + (n * p.size + c) * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) {
          const T d = plane[i] - m;
          var_sum += d * d;
        }
      }
      mean.data<T>()[c] = m;
      var.data<T>()[c] = static_cast<T>(var_sum) / static_cast<T>(count);
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormStatsKernels(), DeviceType::kCPU, CpuStats);

absl::Status CpuGatherStats(const Tensor& means, const Tensor& vars,
                            const Tensor& counts, const Tensor& running_mean,
                            const Tensor& running_var, double momentum,
                            double eps, const Tensor& mean,
                            const Tensor& invstd) {
  const int64_t groups = means.dim(0);
  const int64_t channels = means.dim(1);
  internal::DispatchFloat(means.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* md = means.data<T>();
    const T* vd = vars.data<T>();
    const T* cd = counts.data<T>();
    for (int64_t c = 0; c < channels; ++c) {
      // Chan et al.'s pairwise update, group by group; one group is
      // returned unchanged.
      double n = cd[0];
      double mu = md[c];
      double m2 = static_cast<double>(vd[c]) * n;
      for (int64_t g = 1; g < groups; ++g) {
        const double ng = cd[g];
        const double delta = static_cast<double>(md[g * channels + c]) - mu;
        const double total = n + ng;
        mu += delta * ng / total;
        m2 += static_cast<double>(vd[g * channels + c]) * ng +
              delta * delta * n * ng / total;
        n = total;
      }
      const double v = m2 / n;
      mean.data<T>()[c] = static_cast<T>(mu);
      // PyTorch's InvStd: 0 for a zero variance without eps.
      invstd.data<T>()[c] =
          static_cast<T>(v == 0 && eps == 0 ? 0.0 : 1.0 / std::sqrt(v + eps));
      if (running_mean.defined()) {
        T& r = running_mean.data<T>()[c];
        r = static_cast<T>(momentum * mu + (1 - momentum) * r);
        T& rv = running_var.data<T>()[c];
        rv = static_cast<T>(momentum * (v * n / (n - 1)) + (1 - momentum) * rv);
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormGatherStatsKernels(), DeviceType::kCPU,
                       CpuGatherStats);

absl::Status CpuElemt(const Tensor& out, const Tensor& x, const Tensor& weight,
                      const Tensor& bias, const Tensor& mean,
                      const Tensor& invstd) {
  const internal::DimSplit p = internal::SplitAt(x.shape(), 1);
  internal::DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xd = x.data<T>();
    T* yd = out.data<T>();
    for (int64_t c = 0; c < p.size; ++c) {
      const T w = weight.defined() ? weight.data<T>()[c] : T(1);
      const T b = bias.defined() ? bias.data<T>()[c] : T(0);
      const T a = invstd.data<T>()[c] * w;
      const T shift = b - mean.data<T>()[c] * a;
      for (int64_t n = 0; n < p.outer; ++n) {
        const int64_t base = (n * p.size + c) * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) {
          yd[base + i] = xd[base + i] * a + shift;
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormElemtKernels(), DeviceType::kCPU, CpuElemt);

absl::Status CpuBackwardReduce(const Tensor& dy, const Tensor& x,
                               const Tensor& mean, const Tensor& sum_dy,
                               const Tensor& sum_dy_xmu) {
  const internal::DimSplit p = internal::SplitAt(x.shape(), 1);
  internal::DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xd = x.data<T>();
    const T* gd = dy.data<T>();
    for (int64_t c = 0; c < p.size; ++c) {
      const T m = mean.data<T>()[c];
      double sum = 0, dot = 0;
      for (int64_t n = 0; n < p.outer; ++n) {
        const int64_t base = (n * p.size + c) * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) {
          sum += gd[base + i];
          dot += (xd[base + i] - m) * gd[base + i];
        }
      }
      sum_dy.data<T>()[c] = static_cast<T>(sum);
      sum_dy_xmu.data<T>()[c] = static_cast<T>(dot);
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormBackwardReduceKernels(), DeviceType::kCPU,
                       CpuBackwardReduce);

absl::Status CpuBackwardElemt(const Tensor& dx, const Tensor& dy,
                              const Tensor& x, const Tensor& mean,
                              const Tensor& invstd, const Tensor& weight,
                              const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                              double count) {
  const internal::DimSplit p = internal::SplitAt(x.shape(), 1);
  internal::DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* xd = x.data<T>();
    const T* gd = dy.data<T>();
    T* out = dx.data<T>();
    const bool batch_stats = sum_dy.defined();
    for (int64_t c = 0; c < p.size; ++c) {
      const T w = weight.defined() ? weight.data<T>()[c] : T(1);
      const T m = mean.data<T>()[c];
      const T s = invstd.data<T>()[c];
      // PyTorch's k and grad_mean, in the dtype.
      const T k = batch_stats
                      ? sum_dy_xmu.data<T>()[c] * s * s / static_cast<T>(count)
                      : T(0);
      const T grad_mean =
          batch_stats ? sum_dy.data<T>()[c] / static_cast<T>(count) : T(0);
      for (int64_t n = 0; n < p.outer; ++n) {
        const int64_t base = (n * p.size + c) * p.inner;
        for (int64_t i = 0; i < p.inner; ++i) {
          const int64_t j = base + i;
          out[j] = batch_stats ? (gd[j] - grad_mean - (xd[j] - m) * k) * s * w
                               : gd[j] * s * w;
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormBackwardElemtKernels(), DeviceType::kCPU,
                       CpuBackwardElemt);

// in = {var}, attr = eps; in the dtype, as PyTorch's eval path.
absl::Status CpuInvstd(const Tensor& out, absl::Span<const Tensor> in,
                       double eps) {
  internal::DispatchFloat(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* v = in[0].data<T>();
    T* o = out.data<T>();
    for (int64_t c = 0; c < out.numel(); ++c) {
      o[c] = T(1) / std::sqrt(v[c] + static_cast<T>(eps));
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormInvstdKernels(), DeviceType::kCPU, CpuInvstd);

// ---- Argument checks (the messages live here and nowhere else).

// x (or dy) is f32/f64 [N, C, *].
absl::Status CheckInput(const Tensor& x, const char* op, const char* arg) {
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, op, arg));
  if (x.ndim() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected `", arg, "` of shape [N, C, *] (at least 2-d), got ",
        internal::Describe(x)));
  }
  return absl::OkStatus();
}

// t is `shape` with `like`'s dtype; undefined is fine when `optional`.
absl::Status CheckLike(const Tensor& t, const Shape& shape, const Tensor& like,
                       const char* op, const char* arg, bool optional = false) {
  if (optional && !t.defined()) return absl::OkStatus();
  TANDEM_RETURN_IF_ERROR(internal::CheckDefined(t, op, arg));
  if (t.shape() != shape || t.dtype() != like.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected `", arg, "` ", DTypeName(like.dtype()),
        ShapeToString(shape), " (one value per channel of ",
        internal::Describe(like), "), got ", internal::Describe(t)));
  }
  return absl::OkStatus();
}

absl::Status CheckRunningPair(const Tensor& running_mean,
                              const Tensor& running_var, const char* op) {
  if (running_mean.defined() != running_var.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op,
        ": running_mean and running_var must be both defined or both "
        "undefined, got ",
        internal::Describe(running_mean), " and ",
        internal::Describe(running_var)));
  }
  return absl::OkStatus();
}

absl::Status CheckHyper(double momentum, double eps, const char* op) {
  if (!std::isfinite(momentum) || !std::isfinite(eps) || eps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op,
                     ": expected a finite momentum and a finite eps >= 0, "
                     "got momentum=",
                     momentum, ", eps=", eps));
  }
  return absl::OkStatus();
}

// ---- The pieces on checked arguments: allocate, call the kernel.

absl::StatusOr<BatchNormStats> Stats(const Tensor& x, Device device) {
  TANDEM_ASSIGN_OR_RETURN(BatchNormStatsKernel * kernel,
                          BatchNormStatsKernels().For(device));
  const Shape per_channel = {x.dim(1)};
  BatchNormStats s;
  TANDEM_ASSIGN_OR_RETURN(s.mean,
                          Tensor::Empty(per_channel, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(s.var, Tensor::Empty(per_channel, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, s.mean, s.var));
  return s;
}

absl::StatusOr<BatchNormSaved> Gather(const Tensor& means, const Tensor& vars,
                                      const Tensor& counts,
                                      const Tensor& running_mean,
                                      const Tensor& running_var,
                                      double momentum, double eps,
                                      Device device) {
  TANDEM_ASSIGN_OR_RETURN(BatchNormGatherStatsKernel * kernel,
                          BatchNormGatherStatsKernels().For(device));
  const Shape per_channel = {means.dim(1)};
  BatchNormSaved s;
  TANDEM_ASSIGN_OR_RETURN(s.mean,
                          Tensor::Empty(per_channel, means.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(s.invstd,
                          Tensor::Empty(per_channel, means.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(means, vars, counts, running_mean, running_var,
                                momentum, eps, s.mean, s.invstd));
  return s;
}

absl::StatusOr<Tensor> Elemt(const Tensor& x, const Tensor& weight,
                             const Tensor& bias, const Tensor& mean,
                             const Tensor& invstd, Device device) {
  TANDEM_ASSIGN_OR_RETURN(BatchNormElemtKernel * kernel,
                          BatchNormElemtKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(y, x, weight, bias, mean, invstd));
  return y;
}

absl::StatusOr<BatchNormGradSums> BackwardReduce(const Tensor& dy,
                                                 const Tensor& x,
                                                 const Tensor& mean,
                                                 Device device) {
  TANDEM_ASSIGN_OR_RETURN(BatchNormBackwardReduceKernel * kernel,
                          BatchNormBackwardReduceKernels().For(device));
  const Shape per_channel = {x.dim(1)};
  BatchNormGradSums r;
  TANDEM_ASSIGN_OR_RETURN(r.sum_dy,
                          Tensor::Empty(per_channel, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(r.sum_dy_xmu,
                          Tensor::Empty(per_channel, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(dy, x, mean, r.sum_dy, r.sum_dy_xmu));
  return r;
}

absl::StatusOr<Tensor> BackwardElemt(const Tensor& dy, const Tensor& x,
                                     const Tensor& mean, const Tensor& invstd,
                                     const Tensor& weight,
                                     const BatchNormGradSums& sums,
                                     double count, Device device) {
  TANDEM_ASSIGN_OR_RETURN(BatchNormBackwardElemtKernel * kernel,
                          BatchNormBackwardElemtKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor dx,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(dx, dy, x, mean, invstd, weight, sums.sum_dy,
                                sums.sum_dy_xmu, count));
  return dx;
}

// BatchNorm's backward: gradients of x, weight and bias (inputs 0, 1, 2).
// `training`: mean and invstd are the batch's statistics over `count`
// values; otherwise the running statistics (constants).
absl::Status BatchNormBackward(const Tensor& g, GradSink& sink, const Tensor& x,
                               const Tensor& weight, const Tensor& mean,
                               const Tensor& invstd, bool training,
                               double count) {
  const Device device = x.device();
  const bool need_sums =
      (training && sink.needs(0)) || sink.needs(1) || sink.needs(2);
  BatchNormGradSums sums;
  if (need_sums) {
    TANDEM_ASSIGN_OR_RETURN(sums, BackwardReduce(g, x, mean, device));
  }
  if (sink.needs(0)) {
    TANDEM_ASSIGN_OR_RETURN(
        Tensor dx,
        BackwardElemt(g, x, mean, invstd, weight,
                      training ? sums : BatchNormGradSums{}, count, device));
    TANDEM_RETURN_IF_ERROR(sink.Add(0, std::move(dx)));
  }
  if (sink.needs(1)) {
    TANDEM_ASSIGN_OR_RETURN(Tensor dw, Mul(sums.sum_dy_xmu, invstd));
    TANDEM_RETURN_IF_ERROR(sink.Add(1, std::move(dw)));
  }
  if (sink.needs(2)) TANDEM_RETURN_IF_ERROR(sink.Add(2, sums.sum_dy));
  return absl::OkStatus();
}

// f16/bf16 x with f32 parameters: computed in f32 (differentiable casts),
// rounded back to x's dtype.
absl::StatusOr<Tensor> MixedBatchNorm(const Tensor& x, const Tensor& weight,
                                      const Tensor& bias,
                                      const Tensor& running_mean,
                                      const Tensor& running_var, bool training,
                                      double momentum, double eps) {
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    if (t->defined() && t->dtype() != DType::kF32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "BatchNorm: an ", DTypeName(x.dtype()),
          " input takes f32 weight, "
          "bias and running statistics (computed in f32), got x ",
          internal::Describe(x), " with a parameter ", internal::Describe(*t)));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor x32, x.To(DType::kF32));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, BatchNorm(x32, weight, bias, running_mean, running_var,
                          training, momentum, eps));
  return y.To(x.dtype());
}

}  // namespace

absl::StatusOr<BatchNormStats> BatchNormStatsOf(const Tensor& x) {
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("BatchNormStats", x));
  TANDEM_RETURN_IF_ERROR(CheckInput(x, "BatchNormStats", "x"));
  if (x.numel() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchNormStats: expected at least one value per channel, got ",
        internal::Describe(x)));
  }
  return Stats(x, device);
}

absl::StatusOr<BatchNormSaved> BatchNormGatherStats(
    const Tensor& means, const Tensor& vars, const Tensor& counts,
    const Tensor& running_mean, const Tensor& running_var, double momentum,
    double eps) {
  constexpr const char* kOp = "BatchNormGatherStats";
  TANDEM_ASSIGN_OR_RETURN(
      const Device device,
      internal::OpDevice(kOp, means, vars, counts, running_mean, running_var));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(means, kOp, "means"));
  if (means.ndim() != 2 || means.dim(0) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": expected `means` of shape [G, C] with G >= 1, got ",
        internal::Describe(means)));
  }
  const Shape per_channel = {means.dim(1)};
  TANDEM_RETURN_IF_ERROR(CheckLike(vars, means.shape(), means, kOp, "vars"));
  TANDEM_RETURN_IF_ERROR(
      CheckLike(counts, {means.dim(0)}, means, kOp, "counts"));
  TANDEM_RETURN_IF_ERROR(CheckRunningPair(running_mean, running_var, kOp));
  TANDEM_RETURN_IF_ERROR(CheckLike(running_mean, per_channel, means, kOp,
                                   "running_mean", /*optional=*/true));
  TANDEM_RETURN_IF_ERROR(CheckLike(running_var, per_channel, means, kOp,
                                   "running_var", /*optional=*/true));
  TANDEM_RETURN_IF_ERROR(CheckHyper(momentum, eps, kOp));
  return Gather(means, vars, counts, running_mean, running_var, momentum, eps,
                device);
}

absl::StatusOr<Tensor> BatchNormElemt(const Tensor& x, const Tensor& weight,
                                      const Tensor& bias, const Tensor& mean,
                                      const Tensor& invstd) {
  constexpr const char* kOp = "BatchNormElemt";
  TANDEM_ASSIGN_OR_RETURN(
      const Device device,
      internal::OpDevice(kOp, x, weight, bias, mean, invstd));
  TANDEM_RETURN_IF_ERROR(CheckInput(x, kOp, "x"));
  const Shape per_channel = {x.dim(1)};
  TANDEM_RETURN_IF_ERROR(
      CheckLike(weight, per_channel, x, kOp, "weight", true));
  TANDEM_RETURN_IF_ERROR(CheckLike(bias, per_channel, x, kOp, "bias", true));
  TANDEM_RETURN_IF_ERROR(CheckLike(mean, per_channel, x, kOp, "mean"));
  TANDEM_RETURN_IF_ERROR(CheckLike(invstd, per_channel, x, kOp, "invstd"));
  return Elemt(x, weight, bias, mean, invstd, device);
}

absl::StatusOr<BatchNormGradSums> BatchNormBackwardReduce(const Tensor& dy,
                                                          const Tensor& x,
                                                          const Tensor& mean) {
  constexpr const char* kOp = "BatchNormBackwardReduce";
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice(kOp, dy, x, mean));
  TANDEM_RETURN_IF_ERROR(CheckInput(x, kOp, "x"));
  TANDEM_RETURN_IF_ERROR(CheckLike(dy, x.shape(), x, kOp, "dy"));
  TANDEM_RETURN_IF_ERROR(CheckLike(mean, {x.dim(1)}, x, kOp, "mean"));
  return BackwardReduce(dy, x, mean, device);
}

absl::StatusOr<Tensor> BatchNormBackwardElemt(
    const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
    const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
    double count) {
  constexpr const char* kOp = "BatchNormBackwardElemt";
  TANDEM_ASSIGN_OR_RETURN(
      const Device device,
      internal::OpDevice(kOp, dy, x, mean, invstd, weight, sum_dy, sum_dy_xmu));
  TANDEM_RETURN_IF_ERROR(CheckInput(x, kOp, "x"));
  TANDEM_RETURN_IF_ERROR(CheckLike(dy, x.shape(), x, kOp, "dy"));
  const Shape per_channel = {x.dim(1)};
  TANDEM_RETURN_IF_ERROR(CheckLike(mean, per_channel, x, kOp, "mean"));
  TANDEM_RETURN_IF_ERROR(CheckLike(invstd, per_channel, x, kOp, "invstd"));
  TANDEM_RETURN_IF_ERROR(
      CheckLike(weight, per_channel, x, kOp, "weight", true));
  if (sum_dy.defined() != sum_dy_xmu.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp,
        ": sum_dy and sum_dy_xmu must be both defined or both undefined, "
        "got ",
        internal::Describe(sum_dy), " and ", internal::Describe(sum_dy_xmu)));
  }
  TANDEM_RETURN_IF_ERROR(
      CheckLike(sum_dy, per_channel, x, kOp, "sum_dy", true));
  TANDEM_RETURN_IF_ERROR(
      CheckLike(sum_dy_xmu, per_channel, x, kOp, "sum_dy_xmu", true));
  if (sum_dy.defined() && !(count >= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp,
        ": expected count >= 1 (the values the statistics came from), got ",
        count));
  }
  return BackwardElemt(dy, x, mean, invstd, weight, {sum_dy, sum_dy_xmu}, count,
                       device);
}

absl::StatusOr<Tensor> BatchNorm(const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, const Tensor& running_mean,
                                 const Tensor& running_var, bool training,
                                 double momentum, double eps) {
  constexpr const char* kOp = "BatchNorm";
  TANDEM_ASSIGN_OR_RETURN(
      const Device device,
      internal::OpDevice(kOp, x, weight, bias, running_mean, running_var));
  TANDEM_RETURN_IF_ERROR(internal::CheckDefined(x, kOp, "x"));
  if (Is16BitFloat(x.dtype())) {
    return MixedBatchNorm(x, weight, bias, running_mean, running_var, training,
                          momentum, eps);
  }
  // The one argument check, for every device.
  TANDEM_RETURN_IF_ERROR(CheckInput(x, kOp, "x"));
  const Shape per_channel = {x.dim(1)};
  TANDEM_RETURN_IF_ERROR(
      CheckLike(weight, per_channel, x, kOp, "weight", true));
  TANDEM_RETURN_IF_ERROR(CheckLike(bias, per_channel, x, kOp, "bias", true));
  TANDEM_RETURN_IF_ERROR(CheckRunningPair(running_mean, running_var, kOp));
  TANDEM_RETURN_IF_ERROR(
      CheckLike(running_mean, per_channel, x, kOp, "running_mean", true));
  TANDEM_RETURN_IF_ERROR(
      CheckLike(running_var, per_channel, x, kOp, "running_var", true));
  TANDEM_RETURN_IF_ERROR(CheckHyper(momentum, eps, kOp));
  const int64_t count = x.dim(1) == 0 ? 0 : x.numel() / x.dim(1);
  if (training && count == 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchNorm: Expected more than 1 value per channel when training, got "
        "input size ",
        ShapeToString(x.shape()),
        "; use a batch of 2 or more (or eval mode, which uses the running "
        "statistics)"));
  }
  if (!training && !running_mean.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BatchNorm: eval mode (training=false) normalises with running_mean "
        "and running_var, but they are undefined; pass them, or training=true "
        "to use the batch's statistics"));
  }

  Tensor mean, invstd;
  if (training && count == 0) {
    // An empty batch: nothing to normalise, statistics left alone (as
    // PyTorch); the backward sums are zeros.
    TANDEM_ASSIGN_OR_RETURN(mean,
                            Tensor::Zeros(per_channel, x.dtype(), device));
    TANDEM_ASSIGN_OR_RETURN(invstd,
                            Tensor::Ones(per_channel, x.dtype(), device));
  } else if (training) {
    TANDEM_ASSIGN_OR_RETURN(BatchNormStats stats, Stats(x, device));
    TANDEM_ASSIGN_OR_RETURN(
        Tensor counts,
        Tensor::Full({1}, static_cast<double>(count), x.dtype(), device));
    TANDEM_ASSIGN_OR_RETURN(Tensor means, stats.mean.Reshape({1, x.dim(1)}));
    TANDEM_ASSIGN_OR_RETURN(Tensor vars, stats.var.Reshape({1, x.dim(1)}));
    TANDEM_ASSIGN_OR_RETURN(
        BatchNormSaved saved,
        Gather(means, vars, counts, running_mean.Detach(), running_var.Detach(),
               momentum, eps, device));
    mean = std::move(saved.mean);
    invstd = std::move(saved.invstd);
  } else {
    mean = running_mean.Detach();
    TANDEM_ASSIGN_OR_RETURN(PointwiseKernel * inv,
                            BatchNormInvstdKernels().For(device));
    TANDEM_ASSIGN_OR_RETURN(invstd,
                            Tensor::Empty(per_channel, x.dtype(), device));
    TANDEM_RETURN_IF_ERROR(inv(invstd, {running_var}, eps));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Elemt(x, weight, bias, mean, invstd, device));
  // The one backward formula, in terms of the backward pieces.
  if (ShouldRecord({x, weight, bias})) {
    RecordOp(kOp, y, {x, weight, bias},
             [sx = x.Detach(), sw = weight.Detach(), mean, invstd, training,
              count](const Tensor& g, GradSink& sink) -> absl::Status {
               return BatchNormBackward(g, sink, sx, sw, mean, invstd, training,
                                        static_cast<double>(count));
             });
  }
  return y;
}

}  // namespace tandem
