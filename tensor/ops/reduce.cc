// Reductions and along-dim ops: Sum, Mean, Argmax, Softmax, LogSoftmax.
// A tensor is walked as [outer, size, inner] around the reduced dim.
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
namespace {

using internal::Describe;
using internal::DimSplit;
using internal::DispatchFloat;

// Sum over everything, accumulated in double. mean divides by numel.
absl::Status CpuSumAll(const Tensor& x, bool mean, const Tensor& out) {
  const int64_t n = x.numel();
  DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += px[i];
    // Mean of nothing is 0/0 = NaN, as in PyTorch.
    out.data<T>()[0] =
        static_cast<T>(mean ? acc / static_cast<double>(n) : acc);
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumAllKernels(), DeviceType::kCPU, CpuSumAll);

absl::Status CpuSumAllBackward(const Tensor& g, bool mean, const GradOut& buf) {
  const int64_t n = buf.tensor.numel();
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T v = mean ? static_cast<T>(g.data<T>()[0] / static_cast<T>(n))
                     : g.data<T>()[0];
    T* p = buf.tensor.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      p[i] = buf.accumulate ? p[i] + v : v;
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumAllBackwardKernels(), DeviceType::kCPU,
                       CpuSumAllBackward);

// `d` is normalised.
absl::Status CpuSumDim(const Tensor& x, int64_t d, bool mean,
                       const Tensor& out) {
  const DimSplit s = internal::SplitAt(x.shape(), d);
  DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    std::vector<double> acc(s.inner);
    for (int64_t o = 0; o < s.outer; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < s.size; ++k) {
        const T* row = px + (o * s.size + k) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) acc[i] += row[i];
      }
      for (int64_t i = 0; i < s.inner; ++i) {
        po[o * s.inner + i] = static_cast<T>(
            mean ? acc[i] / static_cast<double>(s.size) : acc[i]);
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumDimKernels(), DeviceType::kCPU, CpuSumDim);

absl::Status CpuSumDimBackward(const Tensor& g, int64_t d, bool mean,
                               const GradOut& buf) {
  const DimSplit s = internal::SplitAt(buf.tensor.shape(), d);
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pg = g.data<T>();
    T* p = buf.tensor.data<T>();
    const T scale = mean ? T(1) / static_cast<T>(s.size) : T(1);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t k = 0; k < s.size; ++k) {
        T* row = p + (o * s.size + k) * s.inner;
        const T* grow = pg + o * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          const T v = mean ? grow[i] * scale : grow[i];
          row[i] = buf.accumulate ? row[i] + v : v;
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumDimBackwardKernels(), DeviceType::kCPU,
                       CpuSumDimBackward);

// f32 over the last dim: PyTorch's kernel, bit for bit.
bool SoftmaxRowsF32(const Tensor& x, const DimSplit& s) {
  return x.dtype() == DType::kF32 && s.inner == 1;
}

// Softmax (log = false) or LogSoftmax (log = true) along normalised dim d.
absl::Status CpuSoftmax(const Tensor& x, int64_t d, bool log, const Tensor& y) {
  const DimSplit s = internal::SplitAt(x.shape(), d);
  if (SoftmaxRowsF32(x, s)) {
    const float* fx = x.data<float>();
    float* fy = y.data<float>();
    if (log) {
      internal::LogSoftmaxRows(fx, s.outer, s.size, fy);
    } else {
      internal::SoftmaxRows(fx, s.outer, s.size, fy);
    }
    return absl::OkStatus();
  }
  DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t base = o * s.size * s.inner + i;
        auto at = [&](int64_t k) { return base + k * s.inner; };
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t k = 0; k < s.size; ++k) mx = std::max(mx, px[at(k)]);
        // All -inf (or empty): use 0 so exp(x - mx) stays well defined.
        if (!std::isfinite(mx)) mx = std::isnan(mx) ? mx : T(0);
        T sum = 0;
        for (int64_t k = 0; k < s.size; ++k) {
          const T e = std::exp(px[at(k)] - mx);
          if (!log) py[at(k)] = e;
          sum += e;
        }
        if (log) {
          const T lse = mx + std::log(sum);
          for (int64_t k = 0; k < s.size; ++k) py[at(k)] = px[at(k)] - lse;
        } else {
          for (int64_t k = 0; k < s.size; ++k) py[at(k)] /= sum;
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SoftmaxKernels(), DeviceType::kCPU, CpuSoftmax);

absl::Status CpuSoftmaxBackward(const Tensor& g, const Tensor& y, int64_t d,
                                bool log, const GradOut& buf) {
  const DimSplit s = internal::SplitAt(y.shape(), d);
  if (SoftmaxRowsF32(y, s)) {
    std::vector<float> gx(static_cast<size_t>(y.numel()));
    (log ? internal::LogSoftmaxBackwardRows : internal::SoftmaxBackwardRows)(
        g.data<float>(), y.data<float>(), s.outer, s.size, gx.data());
    float* p = buf.tensor.data<float>();
    for (size_t j = 0; j < gx.size(); ++j) {
      p[j] = buf.accumulate ? p[j] + gx[j] : gx[j];
    }
    return absl::OkStatus();
  }
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* py = y.data<T>();
    const T* pg = g.data<T>();
    T* p = buf.tensor.data<T>();
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t base = o * s.size * s.inner + i;
        auto at = [&](int64_t k) { return base + k * s.inner; };
        // softmax: gx = y (g - sum(g y)); log: gx = g - e^y sum(g)
        T dot = 0;
        for (int64_t k = 0; k < s.size; ++k) {
          dot += log ? pg[at(k)] : pg[at(k)] * py[at(k)];
        }
        for (int64_t k = 0; k < s.size; ++k) {
          const int64_t j = at(k);
          const T v =
              log ? pg[j] - std::exp(py[j]) * dot : py[j] * (pg[j] - dot);
          p[j] = buf.accumulate ? p[j] + v : v;
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SoftmaxBackwardKernels(), DeviceType::kCPU,
                       CpuSoftmaxBackward);

template <typename T>
void ArgmaxTyped(const T* px, const DimSplit& s, int64_t* po) {
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const T* p = px + o * s.size * s.inner + i;
      int64_t best = 0;
      T bv = p[0];
      for (int64_t k = 1; k < s.size; ++k) {
        const T v = p[k * s.inner];
        bool better;
        if constexpr (std::is_floating_point_v<T>) {
          // NaN wins over everything and the first NaN is kept.
          better = !std::isnan(bv) && (std::isnan(v) || v > bv);
        } else {
          better = v > bv;
        }
        if (better) {
          best = k;
          bv = v;
        }
      }
      po[o * s.inner + i] = best;
    }
  }
}

// `d` is normalised and x.dim(d) > 0.
absl::Status CpuArgmax(const Tensor& x, int64_t d, const Tensor& out) {
  const DimSplit s = internal::SplitAt(x.shape(), d);
  int64_t* po = out.data<int64_t>();
  switch (x.dtype()) {
    case DType::kF32:
      ArgmaxTyped(x.data<float>(), s, po);
      break;
    case DType::kF64:
      ArgmaxTyped(x.data<double>(), s, po);
      break;
    case DType::kI64:
      ArgmaxTyped(x.data<int64_t>(), s, po);
      break;
    case DType::kI32:
      ArgmaxTyped(x.data<int32_t>(), s, po);
      break;
    case DType::kU8:
      ArgmaxTyped(x.data<uint8_t>(), s, po);
      break;
    case DType::kF16:
    case DType::kBF16: {
      TANDEM_ASSIGN_OR_RETURN(Tensor wide, x.Detach().To(DType::kF32));
      ArgmaxTyped(wide.data<float>(), s, po);
      break;
    }
  }
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ArgmaxKernels(), DeviceType::kCPU, CpuArgmax);

// The definitions: routing, the one argument check, the device's kernel.
absl::StatusOr<Tensor> ReduceAll(const Tensor& x, bool mean) {
  if (auto routed =
          internal::RouteLowPrecision(mean ? AmpOp::kMean : AmpOp::kSum, {x},
                                      [&](const std::vector<Tensor>& in) {
                                        return ReduceAll(in[0], mean);
                                      })) {
    return *std::move(routed);
  }
  const char* name = mean ? "Mean" : "Sum";
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice(name, x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, name, "x"));
  TANDEM_ASSIGN_OR_RETURN(SumAllKernel * kernel, SumAllKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty({}, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, mean, out));
  if (ShouldRecord({x})) {
    // The one backward formula: g (over numel when mean) everywhere.
    RecordOp(
        name, out, {x},
        [name, mean, device](const Tensor& g, GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(internal::CheckGradDevice(g, device, name));
          TANDEM_ASSIGN_OR_RETURN(SumAllBackwardKernel * backward,
                                  SumAllBackwardKernels().For(device));
          TANDEM_ASSIGN_OR_RETURN(GradOut buf, sink.GetBuffer(0));
          return backward(g, mean, buf);
        });
  }
  return out;
}

absl::StatusOr<Tensor> ReduceDim(const Tensor& x, int64_t dim, bool keepdim,
                                 bool mean) {
  if (auto routed = internal::RouteLowPrecision(
          mean ? AmpOp::kMean : AmpOp::kSum, {x},
          [&](const std::vector<Tensor>& in) {
            return ReduceDim(in[0], dim, keepdim, mean);
          })) {
    return *std::move(routed);
  }
  const char* name = mean ? "Mean" : "Sum";
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice(name, x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, name, "x"));
  TANDEM_ASSIGN_OR_RETURN(int64_t d, internal::NormalizeDim(dim, x, name));
  TANDEM_ASSIGN_OR_RETURN(SumDimKernel * kernel, SumDimKernels().For(device));
  Shape out_shape = x.shape();
  if (keepdim) {
    out_shape[d] = 1;
  } else {
    out_shape.erase(out_shape.begin() + d);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(out_shape, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, d, mean, out));
  if (ShouldRecord({x})) {
    // The one backward formula: g (over the dim's size when mean) repeated
    // along dim d.
    RecordOp(
        name, out, {x},
        [name, d, mean, device](const Tensor& g,
                                GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(internal::CheckGradDevice(g, device, name));
          TANDEM_ASSIGN_OR_RETURN(SumDimBackwardKernel * backward,
                                  SumDimBackwardKernels().For(device));
          TANDEM_ASSIGN_OR_RETURN(GradOut buf, sink.GetBuffer(0));
          return backward(g, d, mean, buf);
        });
  }
  return out;
}

absl::StatusOr<Tensor> SoftmaxImpl(const Tensor& x, int64_t dim, bool log) {
  if (auto routed = internal::RouteLowPrecision(
          log ? AmpOp::kLogSoftmax : AmpOp::kSoftmax, {x},
          [&](const std::vector<Tensor>& in) {
            return SoftmaxImpl(in[0], dim, log);
          })) {
    return *std::move(routed);
  }
  const char* name = log ? "LogSoftmax" : "Softmax";
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice(name, x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, name, "x"));
  TANDEM_ASSIGN_OR_RETURN(int64_t d, internal::NormalizeDim(dim, x, name));
  TANDEM_ASSIGN_OR_RETURN(SoftmaxKernel * kernel, SoftmaxKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, d, log, y));
  if (ShouldRecord({x})) {
    // The one backward formula, from the output: softmax: gx = y (g -
    // sum(g y)); log: gx = g - e^y sum(g).
    RecordOp(
        name, y, {x},
        [name, d, log, device, sy = y.Detach()](
            const Tensor& g, GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(internal::CheckGradDevice(g, device, name));
          TANDEM_ASSIGN_OR_RETURN(SoftmaxBackwardKernel * backward,
                                  SoftmaxBackwardKernels().For(device));
          TANDEM_ASSIGN_OR_RETURN(GradOut buf, sink.GetBuffer(0));
          return backward(g, sy, d, log, buf);
        });
  }
  return y;
}

}  // namespace

absl::StatusOr<Tensor> Sum(const Tensor& x) { return ReduceAll(x, false); }
absl::StatusOr<Tensor> Mean(const Tensor& x) { return ReduceAll(x, true); }
absl::StatusOr<Tensor> Sum(const Tensor& x, int64_t dim, bool keepdim) {
  return ReduceDim(x, dim, keepdim, false);
}
absl::StatusOr<Tensor> Mean(const Tensor& x, int64_t dim, bool keepdim) {
  return ReduceDim(x, dim, keepdim, true);
}

absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim) {
  return SoftmaxImpl(x, dim, false);
}
absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t dim) {
  return SoftmaxImpl(x, dim, true);
}

absl::StatusOr<Tensor> Argmax(const Tensor& x, int64_t dim) {
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice("Argmax", x));
  TANDEM_RETURN_IF_ERROR(internal::CheckDefined(x, "Argmax", "x"));
  TANDEM_ASSIGN_OR_RETURN(int64_t d, internal::NormalizeDim(dim, x, "Argmax"));
  if (x.dim(d) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Argmax: dim ", dim, " of ", Describe(x),
                     " is empty, so it has no maximum"));
  }
  TANDEM_ASSIGN_OR_RETURN(ArgmaxKernel * kernel, ArgmaxKernels().For(device));
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + d);
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(out_shape, DType::kI64, device));
  TANDEM_RETURN_IF_ERROR(kernel(x, d, out));
  return out;
}

}  // namespace tandem
