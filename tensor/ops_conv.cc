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
#include "tensor/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/conv_gemm.h"
#include "tensor/cpu/im2col.h"
#include "tensor/cpu/onednn_conv.h"
#include "tensor/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops_internal.h"

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

// ConvBackward on oneDNN (float only; callers check UseOneDnn).
absl::Status OneDnnConvBackward(const cpu::ConvProblem& p, const Tensor& x,
                                const Tensor& w, const Tensor& g,
                                GradSink& sink) {
  const float* pg = g.data<float>();
  if (sink.needs(1) || sink.needs(2)) {
    std::vector<float> dw(static_cast<size_t>(w.numel()));
    std::vector<float> db(static_cast<size_t>(p.out_channels));
    TANDEM_RETURN_IF_ERROR(
        cpu::OneDnnConvBackwardWeights(p, x.data<float>(), pg, dw.data(),
                                       sink.needs(2) ? db.data() : nullptr));
    if (sink.needs(1)) {
      TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer b, sink.GetBuffer(1));
      StoreGrad(dw, b.accumulate, b.tensor.data<float>());
    }
    if (sink.needs(2)) {
      TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer b, sink.GetBuffer(2));
      StoreGrad(db, b.accumulate, b.tensor.data<float>());
    }
  }
  if (sink.needs(0)) {
    TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer b, sink.GetBuffer(0));
    if (b.accumulate) {
      std::vector<float> dx(static_cast<size_t>(x.numel()));
      TANDEM_RETURN_IF_ERROR(
          cpu::OneDnnConvBackwardData(p, w.data<float>(), pg, dx.data()));
      StoreGrad(dx, true, b.tensor.data<float>());
    } else {
      TANDEM_RETURN_IF_ERROR(cpu::OneDnnConvBackwardData(
          p, w.data<float>(), pg, b.tensor.data<float>()));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ConvBackward(const cpu::ConvGeometry& geo, int64_t batch,
                          int64_t out_channels, bool onednn, const Tensor& x,
                          const Tensor& w, const Tensor& g, GradSink& sink) {
  const cpu::ConvProblem problem{
      .geometry = geo, .batch = batch, .out_channels = out_channels};
  if constexpr (std::is_same_v<T, float>) {
    if (onednn) {
      return OneDnnConvBackward(problem, x, w, g, sink);
    }
  }
  const int64_t cols = geo.col_cols();
  const int64_t out_plane = out_channels * cols;
  const T* pg = g.data<T>();
  {  // dW and dx in one call: they share the gathered gradient.
    T* dw = nullptr;
    T* dx = nullptr;
    bool accumulate_dw = false, accumulate_dx = false;
    if (sink.needs(1)) {
      TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer b, sink.GetBuffer(1));
      dw = b.tensor.data<T>();
      accumulate_dw = b.accumulate;
    }
    if (sink.needs(0)) {
      TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer b, sink.GetBuffer(0));
      dx = b.tensor.data<T>();
      accumulate_dx = b.accumulate;
    }
    if (dw != nullptr || dx != nullptr) {
      TANDEM_RETURN_IF_ERROR(
          cpu::ConvGemmBackward<T>(problem, x.data<T>(), w.data<T>(), pg, dw,
                                   accumulate_dw, dx, accumulate_dx));
    }
  }
  if (sink.needs(2)) {  // db [O] = sum over n, h, w of g
    TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer db, sink.GetBuffer(2));
    T* pdb = db.tensor.data<T>();
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
      pdb[o] = static_cast<T>((db.accumulate ? pdb[o] : T(0)) + acc);
    }
  }
  return absl::OkStatus();
}

// The CPU kernel, on arguments checked by Conv2d below.
absl::StatusOr<Tensor> CpuConv2d(const Tensor& x, const Tensor& weight,
                                 const Tensor& bias,
                                 const Conv2dOptions& options) {
  const int64_t batch = x.dim(0), out_channels = weight.dim(0);
  const cpu::ConvGeometry geo{.channels = x.dim(1),
                              .height = x.dim(2),
                              .width = x.dim(3),
                              .kernel_h = weight.dim(2),
                              .kernel_w = weight.dim(3),
                              .stride_h = options.stride[0],
                              .stride_w = options.stride[1],
                              .pad_h = options.padding[0],
                              .pad_w = options.padding[1]};
  // Decided once, so backward takes the same path as forward.
  const bool onednn =
      x.dtype() == DType::kF32 &&
      UseOneDnn<float>(
          {.geometry = geo, .batch = batch, .out_channels = out_channels});
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y,
      internal::NewLike({batch, out_channels, geo.out_h(), geo.out_w()},
                        x.dtype()));
  TANDEM_RETURN_IF_ERROR(
      DispatchFloat(x.dtype(), [&](auto zero) -> absl::Status {
        using T = decltype(zero);
        if constexpr (std::is_same_v<T, float>) {
          if (onednn) {
            return cpu::OneDnnConvForward(
                {.geometry = geo, .batch = batch, .out_channels = out_channels},
                x.data<float>(), weight.data<float>(),
                bias.defined() ? bias.data<float>() : nullptr, y.data<float>());
          }
        }
        return cpu::ConvGemmForward<T>(
            {.geometry = geo, .batch = batch, .out_channels = out_channels},
            x.data<T>(), weight.data<T>(),
            bias.defined() ? bias.data<T>() : nullptr, y.data<T>());
      }));
  if (ShouldRecord({x, weight, bias})) {
    RecordOp("Conv2d", y, {x, weight, bias},
             [geo, batch, out_channels, onednn, sx = x.Detach(),
              sw = weight.Detach()](const Tensor& g, GradSink& sink) {
               return DispatchFloat(g.dtype(), [&](auto zero) {
                 using T = decltype(zero);
                 return ConvBackward<T>(geo, batch, out_channels, onednn, sx,
                                        sw, g, sink);
               });
             });
  }
  return y;
}
TANDEM_REGISTER_KERNEL(Conv2dKernels(), DeviceType::kCPU, CpuConv2d);

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
  return kernel(x, weight, bias, options);
}

}  // namespace tandem
