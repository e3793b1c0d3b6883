// Pooling, defined the structured way (docs/adding_an_op.md): MaxPool2d,
// AvgPool2d and AdaptiveAvgPool2d share one geometry (Pool2dArgs), one
// forward row ("Pool2d") and one backward row ("Pool2dBackward") of the
// kernel table. Each op checks its arguments here, once for every device;
// the autograd formula is written once (the gradient is the op
// Pool2dBackward); the CPU kernels are below, CUDA's in
// tensor/cuda/ops/pool.cc. The CPU loops are PyTorch 1.13's
// (aten/src/ATen/native/cpu/MaxPoolKernel.cpp, AvgPoolKernel.cpp,
// AdaptiveAvgPoolKernel.cpp, channels-first), accumulating in the tensor's
// dtype as they do: f32 results are PyTorch's except where its vectorised
// sums round differently (one value in 240 of ops_pool_test's, by an ulp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {

using internal::Describe;
using internal::DispatchFloat;

namespace {

// PyTorch's adaptive window: [floor(i * in / out), ceil((i + 1) * in / out)).
int64_t AdaptiveStart(int64_t i, int64_t out, int64_t in) {
  return (i * in) / out;
}
int64_t AdaptiveEnd(int64_t i, int64_t out, int64_t in) {
  return ((i + 1) * in + out - 1) / out;
}

// One window of a max or average pool: rows [h0, h1), columns [w0, w1)
// of the input, and the average's divisor.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t divisor;
};

Window WindowAt(const Pool2dArgs& a, int64_t oi, int64_t oj, int64_t h,
                int64_t w, int64_t oh, int64_t ow) {
  Window win;
  if (a.mode == PoolMode::kAdaptiveAvg) {
    win.h0 = AdaptiveStart(oi, oh, h);
    win.h1 = AdaptiveEnd(oi, oh, h);
    win.w0 = AdaptiveStart(oj, ow, w);
    win.w1 = AdaptiveEnd(oj, ow, w);
    win.divisor = (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
  }
  win.h0 = oi * a.stride_h - a.pad_h;
  win.w0 = oj * a.stride_w - a.pad_w;
  win.h1 = std::min(win.h0 + a.kernel_h, h + a.pad_h);
  win.w1 = std::min(win.w0 + a.kernel_w, w + a.pad_w);
  const int64_t padded = (win.h1 - win.h0) * (win.w1 - win.w0);
  win.h0 = std::max<int64_t>(win.h0, 0);
  win.w0 = std::max<int64_t>(win.w0, 0);
  win.h1 = std::min(win.h1, h);
  win.w1 = std::min(win.w1, w);
  win.divisor =
      a.count_include_pad ? padded : (win.h1 - win.h0) * (win.w1 - win.w0);
  return win;
}

absl::Status CpuPool2d(const Tensor& x, const Tensor& y, const Tensor& argmax,
                       const Pool2dArgs& a) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t h = x.dim(2), w = x.dim(3);
  const int64_t oh = y.dim(2), ow = y.dim(3);
  DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    int64_t* pi = a.mode == PoolMode::kMax ? argmax.data<int64_t>() : nullptr;
    for (int64_t p = 0; p < planes; ++p) {
      const T* plane = px + p * h * w;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const Window win = WindowAt(a, i, j, h, w, oh, ow);
          const int64_t o = (p * oh + i) * ow + j;
          if (a.mode == PoolMode::kMax) {
            int64_t best = win.h0 * w + win.w0;
            T best_value = -std::numeric_limits<T>::infinity();
            for (int64_t r = win.h0; r < win.h1; ++r) {
              for (int64_t c = win.w0; c < win.w1; ++c) {
                const T v = plane[r * w + c];
                // The first maximum wins; NaN propagates (the first one).
                if (!std::isnan(best_value) &&
                    (v > best_value || std::isnan(v))) {
                  best = r * w + c;
                  best_value = v;
                }
              }
            }
            py[o] = best_value;
            pi[o] = best;
            continue;
          }
          if (win.h0 >= win.h1 || win.w0 >= win.w1) {
            py[o] = T(0);  // a window entirely in the padding
            continue;
          }
          T sum = 0;
          for (int64_t r = win.h0; r < win.h1; ++r) {
            for (int64_t c = win.w0; c < win.w1; ++c) sum += plane[r * w + c];
          }
          if (a.mode == PoolMode::kAdaptiveAvg) {
            // PyTorch divides by the height, then by the width.
            py[o] = sum / T(win.h1 - win.h0) / T(win.w1 - win.w0);
          } else {
            py[o] = sum / T(win.divisor);
          }
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(Pool2dKernels(), DeviceType::kCPU, CpuPool2d);

// Scatters each output's gradient over its window, in output order, as
// PyTorch's backward loops do.
absl::Status CpuPool2dBackward(const Tensor& g, const Tensor& argmax,
                               const Tensor& gx, const Pool2dArgs& a) {
  const int64_t planes = gx.dim(0) * gx.dim(1);
  const int64_t h = gx.dim(2), w = gx.dim(3);
  const int64_t oh = g.dim(2), ow = g.dim(3);
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pg = g.data<T>();
    T* px = gx.data<T>();
    std::fill(px, px + gx.numel(), T(0));
    const int64_t* pi =
        a.mode == PoolMode::kMax ? argmax.data<int64_t>() : nullptr;
    for (int64_t p = 0; p < planes; ++p) {
      T* plane = px + p * h * w;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t o = (p * oh + i) * ow + j;
          if (a.mode == PoolMode::kMax) {
            plane[pi[o]] += pg[o];
            continue;
          }
          const Window win = WindowAt(a, i, j, h, w, oh, ow);
          const T delta = a.mode == PoolMode::kAdaptiveAvg
                              ? pg[o] / T(win.h1 - win.h0) / T(win.w1 - win.w0)
                              : pg[o] / T(win.divisor);
          for (int64_t r = win.h0; r < win.h1; ++r) {
            for (int64_t c = win.w0; c < win.w1; ++c) plane[r * w + c] += delta;
          }
        }
      }
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(Pool2dBackwardKernels(), DeviceType::kCPU,
                       CpuPool2dBackward);

// dL/dx of a pool, on g's device; not recorded (no double backward).
absl::StatusOr<Tensor> Pool2dBackward(const Tensor& g, const Tensor& argmax,
                                      const Shape& x_shape,
                                      const Pool2dArgs& args) {
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("Pool2dBackward", g));
  TANDEM_ASSIGN_OR_RETURN(Pool2dBackwardKernel * kernel,
                          Pool2dBackwardKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor gx, Tensor::Empty(x_shape, g.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(g, argmax, gx, args));
  return gx;
}

// The shared tail of the three ops: allocate, run the device's kernel, and
// record the one backward formula.
absl::StatusOr<Tensor> RunPool(const char* op, const Tensor& x, Device device,
                               const Pool2dArgs& args, int64_t oh, int64_t ow) {
  TANDEM_ASSIGN_OR_RETURN(Pool2dKernel * kernel, Pool2dKernels().For(device));
  const Shape out_shape{x.dim(0), x.dim(1), oh, ow};
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(out_shape, x.dtype(), device));
  Tensor argmax;
  if (args.mode == PoolMode::kMax) {
    TANDEM_ASSIGN_OR_RETURN(argmax,
                            Tensor::Empty(out_shape, DType::kI64, device));
  }
  TANDEM_RETURN_IF_ERROR(kernel(x, y, argmax, args));
  if (ShouldRecord({x})) {
    RecordOp(op, y, {x},
             [argmax, args, x_shape = x.shape()](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_ASSIGN_OR_RETURN(
                   Tensor gx, Pool2dBackward(g, argmax, x_shape, args));
               return sink.Add(0, std::move(gx));
             });
  }
  return y;
}

absl::Status CheckImage(const Tensor& x, const char* op) {
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, op, "x"));
  if (x.ndim() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": x must be [N, C, H, W], got ", Describe(x)));
  }
  return absl::OkStatus();
}

// PyTorch's pooling_output_shape (dilation 1).
int64_t PooledSize(int64_t in, int64_t kernel, int64_t pad, int64_t stride,
                   bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel + (ceil_mode ? stride - 1 : 0);
  // Floor division (span may be negative).
  int64_t out =
      (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The shared check of MaxPool2d and AvgPool2d: kernel, stride and padding
// valid, and at least one output per dim. Fills args' geometry and the
// output size.
absl::Status CheckWindows(const char* op, const Tensor& x,
                          std::array<int64_t, 2> kernel,
                          std::array<int64_t, 2> stride,
                          std::array<int64_t, 2> padding, bool ceil_mode,
                          Pool2dArgs& args, int64_t& oh, int64_t& ow) {
  const auto [kh, kw] = kernel;
  if (stride[0] == 0) stride[0] = kh;  // PyTorch's default: the kernel
  if (stride[1] == 0) stride[1] = kw;
  const auto [sh, sw] = stride;
  const auto [ph, pw] = padding;
  if (kh < 1 || kw < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": kernel must be >= 1, got (", kh, ", ", kw, ")"));
  }
  if (sh < 1 || sw < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": stride must be >= 1 (or {0, 0} for the kernel size), got (", sh,
        ", ", sw, ")"));
  }
  if (ph < 0 || pw < 0 || ph > kh / 2 || pw > kw / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": padding (", ph, ", ", pw,
        ") must be >= 0 and at most half of kernel size (", kh, ", ", kw,
        ") (PyTorch: pad should be at most half of kernel size)"));
  }
  const int64_t h = x.dim(2), w = x.dim(3);
  oh = PooledSize(h, kh, ph, sh, ceil_mode);
  ow = PooledSize(w, kw, pw, sw, ceil_mode);
  if (oh < 1 || ow < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": kernel (", kh, ", ", kw, ") with stride (", sh, ", ", sw,
        ") and padding (", ph, ", ", pw, ") does not fit x ", Describe(x),
        ": output size (", oh, ", ", ow,
        ") is too small; the kernel must be no larger than the padded "
        "input"));
  }
  args.kernel_h = kh;
  args.kernel_w = kw;
  args.stride_h = sh;
  args.stride_w = sw;
  args.pad_h = ph;
  args.pad_w = pw;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> MaxPool2d(const Tensor& x,
                                 const MaxPool2dOptions& options) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kMaxPool2d, {x}, [&](const std::vector<Tensor>& in) {
            return MaxPool2d(in[0], options);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("MaxPool2d", x));
  TANDEM_RETURN_IF_ERROR(CheckImage(x, "MaxPool2d"));
  Pool2dArgs args;
  args.mode = PoolMode::kMax;
  int64_t oh = 0, ow = 0;
  TANDEM_RETURN_IF_ERROR(CheckWindows("MaxPool2d", x, options.kernel,
                                      options.stride, options.padding,
                                      /*ceil_mode=*/false, args, oh, ow));
  return RunPool("MaxPool2d", x, device, args, oh, ow);
}

absl::StatusOr<Tensor> AvgPool2d(const Tensor& x,
                                 const AvgPool2dOptions& options) {
  // Averages run in their input's dtype, like the unary ops (kUnary's
  // policy); f16/bf16 compute in f32.
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kUnary, {x}, [&](const std::vector<Tensor>& in) {
            return AvgPool2d(in[0], options);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("AvgPool2d", x));
  TANDEM_RETURN_IF_ERROR(CheckImage(x, "AvgPool2d"));
  Pool2dArgs args;
  args.mode = PoolMode::kAvg;
  args.count_include_pad = options.count_include_pad;
  int64_t oh = 0, ow = 0;
  TANDEM_RETURN_IF_ERROR(CheckWindows("AvgPool2d", x, options.kernel,
                                      options.stride, options.padding,
                                      options.ceil_mode, args, oh, ow));
  return RunPool("AvgPool2d", x, device, args, oh, ow);
}

absl::StatusOr<Tensor> AdaptiveAvgPool2d(const Tensor& x,
                                         std::array<int64_t, 2> output_size) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kUnary, {x}, [&](const std::vector<Tensor>& in) {
            return AdaptiveAvgPool2d(in[0], output_size);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("AdaptiveAvgPool2d", x));
  TANDEM_RETURN_IF_ERROR(CheckImage(x, "AdaptiveAvgPool2d"));
  const auto [oh, ow] = output_size;
  if (oh < 0 || ow < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdaptiveAvgPool2d: output_size must be >= 0, got (", oh,
                     ", ", ow, ")"));
  }
  if (x.dim(2) < 1 || x.dim(3) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdaptiveAvgPool2d: x must have H and W >= 1, got ", Describe(x)));
  }
  Pool2dArgs args;
  args.mode = PoolMode::kAdaptiveAvg;
  return RunPool("AdaptiveAvgPool2d", x, device, args, oh, ow);
}

}  // namespace tandem
