// Gelu, defined the structured way (docs/adding_an_op.md is its walk-
// through): one argument check, one autograd formula (the gradient is the op
// GeluBackward), and a kernel per device in the kernel table: the CPU's
// here, CUDA's in tensor/cuda/ops/gelu.cc. Values follow PyTorch's
// torch.nn.functional.gelu(x, approximate='none' | 'tanh').
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/avx2/avx2_math.h"
#include "tensor/cpu/avx2/gelu_avx2.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

// PyTorch's CPU formulas (aten/src/ATen/native/cpu/Activation.cpp).
template <typename T>
T GeluValue(T x, bool tanh_form) {
  if (tanh_form) {
    const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5);
    const T kappa = T(0.044715);
    const T inner = beta * (x + kappa * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  return x * T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
}

template <typename T>
T GeluGrad(T x, bool tanh_form) {
  if (tanh_form) {
    const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5);
    const T kappa = T(0.044715);
    const T x_sq = x * x;
    const T inner = beta * (x + kappa * x_sq * x);
    const T tanh_inner = std::tanh(inner);
    const T left = T(0.5) * x;
    const T right = T(1) + tanh_inner;
    const T left_derivative = T(0.5) * right;
    const T right_derivative =
        (T(1) - tanh_inner * tanh_inner) * beta * (T(1) + T(3) * kappa * x_sq);
    return left_derivative + left * right_derivative;
  }
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
  return cdf + x * pdf;
}

// f32's tanh form on a CPU with AVX2 and FMA: tensor/cpu/avx2/gelu_avx2.h.
bool UseAvx2(const Tensor& out, double attr) {
  return out.dtype() == DType::kF32 && attr != 0 &&
         internal::avx2::Avx2FmaCpu();
}

absl::Status CpuGelu(const Tensor& out, absl::Span<const Tensor> in,
                     double attr) {
  if (UseAvx2(out, attr)) {
    internal::GeluTanhAvx2(in[0].data<float>(), out.numel(), out.data<float>());
    return absl::OkStatus();
  }
  internal::DispatchFloat(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* x = in[0].data<T>();
    T* y = out.data<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) y[i] = GeluValue(x[i], attr != 0);
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(GeluKernels(), DeviceType::kCPU, CpuGelu);

absl::Status CpuGeluBackward(const Tensor& out, absl::Span<const Tensor> in,
                             double attr) {
  if (UseAvx2(out, attr)) {
    internal::GeluTanhBackwardAvx2(in[0].data<float>(), in[1].data<float>(),
                                   out.numel(), out.data<float>());
    return absl::OkStatus();
  }
  internal::DispatchFloat(out.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* g = in[0].data<T>();
    const T* x = in[1].data<T>();
    T* gx = out.data<T>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) gx[i] = g[i] * GeluGrad(x[i], attr != 0);
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(GeluBackwardKernels(), DeviceType::kCPU,
                       CpuGeluBackward);

double Attr(GeluApproximation approximate) {
  return approximate == GeluApproximation::kTanh ? 1 : 0;
}

// dL/dx = g * gelu'(x), on x's device; not recorded (no double backward).
absl::StatusOr<Tensor> GeluBackward(const Tensor& g, const Tensor& x,
                                    GeluApproximation approximate) {
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("GeluBackward", g, x));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(g, x, "GeluBackward"));
  TANDEM_ASSIGN_OR_RETURN(PointwiseKernel * kernel,
                          GeluBackwardKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor gx,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(gx, {g, x}, Attr(approximate)));
  return gx;
}

}  // namespace

absl::StatusOr<Tensor> Gelu(const Tensor& x, GeluApproximation approximate) {
  // f16/bf16 (and autocast): computed in f32, rounded back, as PyTorch's
  // CPU kernels do; the kernels see f32 and f64 only.
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kUnary, {x}, [&](const std::vector<Tensor>& in) {
            return Gelu(in[0], approximate);
          })) {
    return *std::move(routed);
  }
  // The one argument check, for every device.
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice("Gelu", x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, "Gelu", "x"));
  TANDEM_ASSIGN_OR_RETURN(PointwiseKernel * kernel, GeluKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(y, {x}, Attr(approximate)));
  // The one backward formula: gx = GeluBackward(g, x), itself an op with a
  // kernel per device.
  if (ShouldRecord({x})) {
    RecordOp("Gelu", y, {x},
             [sx = x.Detach(), approximate](const Tensor& g,
                                            GradSink& sink) -> absl::Status {
               TANDEM_ASSIGN_OR_RETURN(Tensor gx,
                                       GeluBackward(g, sx, approximate));
               return sink.Add(0, std::move(gx));
             });
  }
  return y;
}

}  // namespace tandem
