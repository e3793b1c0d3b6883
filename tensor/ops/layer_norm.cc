// LayerNorm (tensor/ops.h), defined the structured way
// (docs/adding_an_op.md): one argument check, one autograd formula (the
// gradient is the kernel row LayerNormBackward), a kernel per device: the
// CPU's here, CUDA's in tensor/cuda/ops/layer_norm.cc.
//
// The CPU kernels work row by row over [rows, cols]. Sums are accumulated
// in double, in kLanes independent partial sums (j mod kLanes) combined at
// the end of the row, so that the compiler vectorises them (-O3
// -march=native: AVX2 lanes of doubles) without reassociating anything
// itself; the elementwise loops are plain loops over the row. The forward
// output is PyTorch's form (aten/src/ATen/native/cpu/layer_norm_kernel.cpp):
// (x * rstd + (-rstd * mean)) * weight + bias in the dtype, with mean and
// rstd rounded to the dtype; PyTorch computes mean and variance in float
// with its own (Welford) reductions, so f32 results differ from it by an
// ulp or so.
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

constexpr int kLanes = 8;

// sum over j < n of f(j), in double, kLanes partial sums.
template <typename F>
double RowSum(int64_t n, F&& f) {
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) acc[k] += f(j + k);
  }
  for (; j < n; ++j) acc[0] += f(j);
  double total = 0;
  for (double a : acc) total += a;
  return total;
}

absl::Status CpuLayerNorm(const Tensor& x, const Tensor& weight,
                          const Tensor& bias, int64_t cols, double eps,
                          const Tensor& y, const Tensor& mean,
                          const Tensor& rstd) {
  const int64_t rows = mean.numel();
  internal::DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* w = weight.data<T>();
    const T* b = bias.data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x.data<T>() + r * cols;
      T* yr = y.data<T>() + r * cols;
      const double mu =
          RowSum(cols, [&](int64_t j) { return double{xr[j]}; }) / cols;
      const double var = RowSum(cols,
                                [&](int64_t j) {
                                  const double d = double{xr[j]} - mu;
                                  return d * d;
                                }) /
                         cols;
      const T m = static_cast<T>(mu);
      const T s = static_cast<T>(1 / std::sqrt(var + eps));
      const T shift = -s * m;
      if (w != nullptr && b != nullptr) {
        for (int64_t j = 0; j < cols; ++j) {
          yr[j] = (xr[j] * s + shift) * w[j] + b[j];
        }
      } else {
        for (int64_t j = 0; j < cols; ++j) {
          yr[j] = (xr[j] * s + shift) * (w ? w[j] : T(1)) + (b ? b[j] : T(0));
        }
      }
      mean.data<T>()[r] = m;
      rstd.data<T>()[r] = s;
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(LayerNormKernels(), DeviceType::kCPU, CpuLayerNorm);

// With g = dy * weight and xhat = (x - mean) * rstd per row:
//   dx = rstd * (g - sum(g) / cols - xhat * sum(g * xhat) / cols),
//   dweight = sum over rows of dy * xhat, dbias = sum over rows of dy.
absl::Status CpuLayerNormBackward(const Tensor& dy, const Tensor& x,
                                  const Tensor& mean, const Tensor& rstd,
                                  const Tensor& weight, int64_t cols,
                                  const Tensor& dx, const Tensor& dweight,
                                  const Tensor& dbias) {
  const int64_t rows = mean.numel();
  internal::DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* w = weight.data<T>();
    std::vector<double> dw_acc(dweight.defined() ? cols : 0, 0.0);
    std::vector<double> db_acc(dbias.defined() ? cols : 0, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x.data<T>() + r * cols;
      const T* gr = dy.data<T>() + r * cols;
      const T m = mean.data<T>()[r];
      const T s = rstd.data<T>()[r];
      if (dx.defined()) {
        const double sum_g = RowSum(cols, [&](int64_t j) {
          return double{gr[j]} * (w ? double{w[j]} : 1.0);
        });
        const double sum_gx = RowSum(cols, [&](int64_t j) {
          return double{gr[j]} * (w ? double{w[j]} : 1.0) *
                 ((double{xr[j]} - m) * s);
        });
        const T c1 = static_cast<T>(s * sum_g / cols);
        const T c2 = static_cast<T>(double{s} * s * sum_gx / cols);
        T* out = dx.data<T>() + r * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const T g = w ? gr[j] * w[j] : gr[j];
          out[j] = s * g - c1 - (xr[j] - m) * c2;
        }
      }
      for (int64_t j = 0; j < static_cast<int64_t>(dw_acc.size()); ++j) {
        dw_acc[j] += double{gr[j]} * ((double{xr[j]} - m) * s);
      }
      for (int64_t j = 0; j < static_cast<int64_t>(db_acc.size()); ++j) {
        db_acc[j] += gr[j];
      }
    }
    for (size_t j = 0; j < dw_acc.size(); ++j) {
      dweight.data<T>()[j] = static_cast<T>(dw_acc[j]);
    }
    for (size_t j = 0; j < db_acc.size(); ++j) {
      dbias.data<T>()[j] = static_cast<T>(db_acc[j]);
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(LayerNormBackwardKernels(), DeviceType::kCPU,
                       CpuLayerNormBackward);

// weight or bias: undefined, or `shape` with x's dtype.
absl::Status CheckAffine(const Tensor& t, const Shape& shape, const Tensor& x,
                         const char* arg) {
  if (!t.defined()) return absl::OkStatus();
  if (t.shape() != shape || t.dtype() != x.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerNorm: expected `", arg, "` ", DTypeName(x.dtype()),
        ShapeToString(shape), " (normalized_shape, x's dtype) for x ",
        internal::Describe(x), ", got ", internal::Describe(t)));
  }
  return absl::OkStatus();
}

// f16/bf16 operands: computed in f32 (differentiable casts), the output
// rounded to x's dtype.
absl::StatusOr<Tensor> LowPrecisionLayerNorm(const Tensor& x,
                                             const Shape& normalized_shape,
                                             const Tensor& weight,
                                             const Tensor& bias, double eps) {
  std::vector<Tensor> wide;
  for (const Tensor* t : {&x, &weight, &bias}) {
    if (t->defined() && Is16BitFloat(t->dtype())) {
      TANDEM_ASSIGN_OR_RETURN(Tensor w, t->To(DType::kF32));
      wide.push_back(std::move(w));
    } else {
      wide.push_back(*t);
    }
  }
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, LayerNorm(wide[0], normalized_shape, wide[1], wide[2], eps));
  return y.To(x.dtype());
}

}  // namespace

absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Shape& normalized_shape,
                                 const Tensor& weight, const Tensor& bias,
                                 double eps) {
  constexpr const char* kOp = "LayerNorm";
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice(kOp, x, weight, bias));
  TANDEM_RETURN_IF_ERROR(internal::CheckDefined(x, kOp, "x"));
  for (const Tensor* t : {&x, &weight, &bias}) {
    if (t->defined() && Is16BitFloat(t->dtype())) {
      return LowPrecisionLayerNorm(x, normalized_shape, weight, bias, eps);
    }
  }
  // The one argument check, for every device.
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, kOp, "x"));
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  bool trailing = k >= 1 && k <= x.ndim();
  for (int64_t d = 0; trailing && d < k; ++d) {
    trailing = x.dim(x.ndim() - k + d) == normalized_shape[d];
  }
  if (!trailing) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerNorm: normalized_shape ", ShapeToString(normalized_shape),
        " must be non-empty and equal the trailing dims of x, got x ",
        internal::Describe(x),
        " (PyTorch: \"Given normalized_shape=..., expected input with shape "
        "[*, ...]\")"));
  }
  TANDEM_RETURN_IF_ERROR(CheckAffine(weight, normalized_shape, x, "weight"));
  TANDEM_RETURN_IF_ERROR(CheckAffine(bias, normalized_shape, x, "bias"));
  if (!std::isfinite(eps) || eps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LayerNorm: expected a finite eps >= 0, got eps=", eps));
  }
  int64_t cols = 1;
  for (int64_t n : normalized_shape) cols *= n;
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;

  TANDEM_ASSIGN_OR_RETURN(LayerNormKernel * kernel,
                          LayerNormKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(Tensor mean,
                          Tensor::Empty({rows}, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(Tensor rstd,
                          Tensor::Empty({rows}, x.dtype(), device));
  if (cols > 0) {
    TANDEM_RETURN_IF_ERROR(kernel(x, weight, bias, cols, eps, y, mean, rstd));
  }
  // The one backward formula: the LayerNormBackward row, on x's device.
  if (ShouldRecord({x, weight, bias})) {
    RecordOp(
        kOp, y, {x, weight, bias},
        [sx = x.Detach(), sw = weight.Detach(), mean, rstd, cols,
         normalized_shape](const Tensor& g, GradSink& sink) -> absl::Status {
          const Device d = sx.device();
          Tensor dx, dw, db;
          if (sink.needs(0)) {
            TANDEM_ASSIGN_OR_RETURN(dx,
                                    Tensor::Empty(sx.shape(), sx.dtype(), d));
          }
          if (sink.needs(1)) {
            TANDEM_ASSIGN_OR_RETURN(
                dw, Tensor::Empty(normalized_shape, sx.dtype(), d));
          }
          if (sink.needs(2)) {
            TANDEM_ASSIGN_OR_RETURN(
                db, Tensor::Empty(normalized_shape, sx.dtype(), d));
          }
          if (cols > 0) {
            TANDEM_ASSIGN_OR_RETURN(LayerNormBackwardKernel * backward,
                                    LayerNormBackwardKernels().For(d));
            TANDEM_RETURN_IF_ERROR(
                backward(g, sx, mean, rstd, sw, cols, dx, dw, db));
          }
          if (dx.defined()) TANDEM_RETURN_IF_ERROR(sink.Add(0, dx));
          if (dw.defined()) TANDEM_RETURN_IF_ERROR(sink.Add(1, dw));
          if (db.defined()) TANDEM_RETURN_IF_ERROR(sink.Add(2, db));
          return absl::OkStatus();
        });
  }
  return y;
}

}  // namespace tandem
