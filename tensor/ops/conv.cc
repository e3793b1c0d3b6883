// Conv2d (NCHW): by default im2col + GEMM over the whole batch
// (tensor/cpu/conv_gemm.h); under KernelChoice::kPyTorch, oneDNN's
// primitives where PyTorch uses them.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/conv_gemm.h"
#include "tensor/cpu/im2col.h"
#include "tensor/cpu/onednn_conv.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

using internal::Describe;
using internal::DispatchFloat;

// Under KernelChoice::kPyTorch, the f32 convolutions that PyTorch 1.13
// sends to oneDNN go to oneDNN here too (tensor/cpu/onednn_conv.h): same
// primitives, same bits. Not the default: over resnet18's convolutions at
// 32x32 inputs they take 3.6x conv_gemm's CPU time (far more on the 1x1
// maps; bench/conv_split, bench/PERFORMANCE.md).
template <typename T>
bool UseOneDnn(const cpu::ConvProblem& p) {
  return std::is_same_v<T, float> &&
         cpu::GetKernelChoice() == cpu::KernelChoice::kPyTorch &&
         cpu::PyTorchUsesOneDnn(p);
}

// dst = src (overwrite) or dst += src (accumulate).
template <typename T>
void StoreGrad(const std::vector<T>& src, bool accumulate, T* dst) {
  for (size_t i = 0; i < src.size(); ++i) {
    dst[i] = accumulate ? dst[i] + src[i] : src[i];
  }
}

// The convolution of x [N, C, H, W] with weight [O, C, kh, kw] that the
// definition checked.
cpu::ConvProblem ProblemOf(const Tensor& x, const Tensor& weight,
                           const Conv2dOptions& options) {
  return {.geometry = {.channels = x.dim(1),
                       .height = x.dim(2),
                       .width = x.dim(3),
                       .kernel_h = weight.dim(2),
                       .kernel_w = weight.dim(3),
                       .stride_h = options.stride[0],
                       .stride_w = options.stride[1],
                       .pad_h = options.padding[0],
                       .pad_w = options.padding[1]},
          .batch = x.dim(0),
          .out_channels = weight.dim(0)};
}

// Whether this f32/f64 convolution runs on oneDNN. A function of the
// geometry and the process's KernelChoice (set once by a binary at start),
// so the backward takes the forward's path.
bool OnOneDnn(DType dtype, const cpu::ConvProblem& p) {
  return dtype == DType::kF32 && UseOneDnn<float>(p);
}

// ConvBackward on oneDNN (float only; callers check OnOneDnn).
absl::Status OneDnnConvBackward(const cpu::ConvProblem& p, const Tensor& x,
                                const Tensor& w, const Tensor& g,
                                const GradOut& gx, const GradOut& gw,
                                const GradOut& gb) {
  const float* pg = g.data<float>();
  if (gw.tensor.defined() || gb.tensor.defined()) {
    std::vector<float> dw(static_cast<size_t>(w.numel()));
    std::vector<float> db(static_cast<size_t>(p.out_channels));
    TANDEM_RETURN_IF_ERROR(cpu::OneDnnConvBackwardWeights(
        p, x.data<float>(), pg, dw.data(),
        gb.tensor.defined() ? db.data() : nullptr));
    if (gw.tensor.defined()) {
      StoreGrad(dw, gw.accumulate, gw.tensor.data<float>());
    }
    if (gb.tensor.defined()) {
      StoreGrad(db, gb.accumulate, gb.tensor.data<float>());
    }
  }
  if (gx.tensor.defined()) {
    if (gx.accumulate) {
      std::vector<float> dx(static_cast<size_t>(x.numel()));
      TANDEM_RETURN_IF_ERROR(
          cpu::OneDnnConvBackwardData(p, w.data<float>(), pg, dx.data()));
      StoreGrad(dx, true, gx.tensor.data<float>());
    } else {
      TANDEM_RETURN_IF_ERROR(cpu::OneDnnConvBackwardData(
          p, w.data<float>(), pg, gx.tensor.data<float>()));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ConvBackward(const cpu::ConvProblem& problem, const Tensor& x,
                          const Tensor& w, const Tensor& g, const GradOut& gx,
                          const GradOut& gw, const GradOut& gb) {
  if constexpr (std::is_same_v<T, float>) {
    if (OnOneDnn(DType::kF32, problem)) {
      return OneDnnConvBackward(problem, x, w, g, gx, gw, gb);
    }
  }
  const int64_t batch = problem.batch, out_channels = problem.out_channels;
  const int64_t cols = problem.geometry.col_cols();
  const int64_t out_plane = out_channels * cols;
  const T* pg = g.data<T>();
  // dW and dx in one call: they share the gathered gradient.
  T* dw = gw.tensor.defined() ? gw.tensor.data<T>() : nullptr;
  T* dx = gx.tensor.defined() ? gx.tensor.data<T>() : nullptr;
  if (dw != nullptr || dx != nullptr) {
    TANDEM_RETURN_IF_ERROR(
        cpu::ConvGemmBackward<T>(problem, x.data<T>(), w.data<T>(), pg, dw,
                                 gw.accumulate, dx, gx.accumulate));
  }
  if (gb.tensor.defined()) {  // db [O] = sum over n, h, w of g
    T* pdb = gb.tensor.data<T>();
    for (int64_t o = 0; o < out_channels; ++o) {
      double acc = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const T* p = pg + n * out_plane + o * cols;
        // 8 independent lanes: no serial dependency chain.
        double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 8 <= cols; i += 8) {
          for (int l = 0; l < 8; ++l) lane[l] += p[i + l];
        }
        for (; i < cols; ++i) lane[0] += p[i];
        for (int l = 0; l < 8; ++l) acc += lane[l];
      }
      pdb[o] = static_cast<T>((gb.accumulate ? pdb[o] : T(0)) + acc);
    }
  }
  return absl::OkStatus();
}

// The CPU kernels, on arguments checked by Conv2d below.
absl::Status CpuConv2d(const Tensor& x, const Tensor& weight,
                       const Tensor& bias, const Conv2dOptions& options,
                       const Tensor& y) {
  const cpu::ConvProblem problem = ProblemOf(x, weight, options);
  const bool onednn = OnOneDnn(x.dtype(), problem);
  return DispatchFloat(x.dtype(), [&](auto zero) -> absl::Status {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, float>) {
      if (onednn) {
        return cpu::OneDnnConvForward(
            problem, x.data<float>(), weight.data<float>(),
            bias.defined() ? bias.data<float>() : nullptr, y.data<float>());
      }
    }
    return cpu::ConvGemmForward<T>(problem, x.data<T>(), weight.data<T>(),
                                   bias.defined() ? bias.data<T>() : nullptr,
                                   y.data<T>());
  });
}
TANDEM_REGISTER_KERNEL(Conv2dKernels(), DeviceType::kCPU, CpuConv2d);

absl::Status CpuConv2dBackward(const Tensor& g, const Tensor& x,
                               const Tensor& weight,
                               const Conv2dOptions& options, const GradOut& gx,
                               const GradOut& gw, const GradOut& gb) {
  const cpu::ConvProblem problem = ProblemOf(x, weight, options);
  return DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return ConvBackward<T>(problem, x, weight, g, gx, gw, gb);
  });
}
TANDEM_REGISTER_KERNEL(Conv2dBackwardKernels(), DeviceType::kCPU,
                       CpuConv2dBackward);

}  // namespace

absl::StatusOr<Tensor> Conv2d(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const Conv2dOptions& options) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kConv2d, {x, weight, bias},
          [&](const std::vector<Tensor>& in) {
            return Conv2d(in[0], in[1], in[2], options);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("Conv2d", x, weight, bias));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, "Conv2d", "x"));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(weight, "Conv2d", "weight"));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(x, weight, "Conv2d"));
  if (x.ndim() != 4 || weight.ndim() != 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2d: x must be [N, C, H, W] and weight [O, C, kh, kw]; got x ",
        Describe(x), " and weight ", Describe(weight)));
  }
  const auto [sh, sw] = options.stride;
  const auto [ph, pw] = options.padding;
  if (sh < 1 || sw < 1 || ph < 0 || pw < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2d: stride must be >= 1 and padding >= 0; got stride (", sh, ", ",
        sw, ") padding (", ph, ", ", pw, ")"));
  }
  const int64_t out_channels = weight.dim(0), channels = x.dim(1);
  const int64_t height = x.dim(2), width = x.dim(3);
  const int64_t kernel_h = weight.dim(2), kernel_w = weight.dim(3);
  if (weight.dim(1) != channels) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2d: x ", Describe(x), " has ", channels, " channels but weight ",
        Describe(weight), " expects ", weight.dim(1)));
  }
  if (kernel_h < 1 || kernel_w < 1 || height + 2 * ph < kernel_h ||
      width + 2 * pw < kernel_w) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Conv2d: kernel ", kernel_h, "x", kernel_w,
        " does not fit the padded input ", height + 2 * ph, "x", width + 2 * pw,
        " (x ", Describe(x), ", weight ", Describe(weight), ")"));
  }
  if (bias.defined()) {
    TANDEM_RETURN_IF_ERROR(internal::CheckFloat(bias, "Conv2d", "bias"));
    TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(x, bias, "Conv2d"));
    if (bias.shape() != Shape{out_channels}) {
      return absl::InvalidArgumentError(
          absl::StrCat("Conv2d: bias ", Describe(bias), " must be [",
                       out_channels, "] to match weight ", Describe(weight)));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(Conv2dKernel * kernel, Conv2dKernels().For(device));
  const int64_t out_h = (height + 2 * ph - kernel_h) / sh + 1;
  const int64_t out_w = (width + 2 * pw - kernel_w) / sw + 1;
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y,
      Tensor::Empty({x.dim(0), out_channels, out_h, out_w}, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, weight, bias, options, y));
  if (ShouldRecord({x, weight, bias})) {
    // The one backward formula: Conv2dBackward writes (or adds) each
    // wanted gradient in place (gemm beta = 1 where it accumulates).
    RecordOp("Conv2d", y, {x, weight, bias},
             [sx = x.Detach(), sw = weight.Detach(), options, device](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_RETURN_IF_ERROR(
                   internal::CheckGradDevice(g, device, "Conv2d"));
               TANDEM_ASSIGN_OR_RETURN(Conv2dBackwardKernel * backward,
                                       Conv2dBackwardKernels().For(device));
               GradOut gx, gw, gb;
               if (sink.needs(0)) {
                 TANDEM_ASSIGN_OR_RETURN(gx, sink.GetBuffer(0));
               }
               if (sink.needs(1)) {
                 TANDEM_ASSIGN_OR_RETURN(gw, sink.GetBuffer(1));
               }
               if (sink.needs(2)) {
                 TANDEM_ASSIGN_OR_RETURN(gb, sink.GetBuffer(2));
               }
               return backward(g, sx, sw, options, gx, gw, gb);
             });
  }
  return y;
}

}  // namespace tandem
