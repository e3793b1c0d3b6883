// MatMul and Linear on OpenBLAS GEMM. Transposes are GEMM flags; backward
// GEMMs write straight into the gradient buffers (beta = 1 to accumulate,
// 0 to overwrite), so Linear's backward is three GEMMs and a column sum.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/pytorch_math/cascade_sum.h"
#include "tensor/cpu/skinny_gemm.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/bf16.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

using internal::Describe;
using internal::DispatchFloat;

// Linear's f32 forward at training batch sizes computes y^T = W x^T (the
// bias pre-filled, beta = 1) and transposes it. Measured with OpenBLAS, one
// thread, transposition included (GFLOP/s, direct -> transposed): batch 64
// at 4096x4096 62 -> 68, 1024 -> 4096 65 -> 70, 4096 -> 1024 63 -> 73,
// 1024x1024 66 -> 83; batch 256 at 4096x4096 88 -> 91; batch 32 at
// 256x256 71 -> 77 but 64 -> 256 66 -> 64; batch 512 at 512x512 94 -> 79.
// Hence up to 256 rows, and f32 only: f64 (dgemm) was 10-20 % slower
// transposed at every shape tried. Each output is bias + the same dot
// product, blocked the same way over `in`: only C's layout changes.
constexpr int64_t kTransposedLinearMaxBatch = 256;

// y[batch, out] = bias + x W^T through y^T. Reuses one scratch per thread
// (training calls this with the same shapes every step).
template <typename T>
absl::Status LinearForwardTransposed(const T* x, const T* w, const T* bias,
                                     int64_t batch, int64_t in,
                                     int64_t out_features, T* y) {
  thread_local std::vector<T> scratch;
  scratch.resize(static_cast<size_t>(batch * out_features));
  T* yt = scratch.data();  // [out_features, batch]
  if (bias != nullptr) {
    for (int64_t o = 0; o < out_features; ++o) {
      std::fill(yt + o * batch, yt + (o + 1) * batch, bias[o]);
    }
  }
  TANDEM_RETURN_IF_ERROR(cpu::Gemm<T>(false, true, out_features, batch, in,
                                      T(1), w, x, bias ? T(1) : T(0), yt));
  // Blocked transpose: both sides stay in L1 within a 32 x 32 tile.
  constexpr int64_t kTile = 32;
  for (int64_t o0 = 0; o0 < out_features; o0 += kTile) {
    const int64_t o1 = std::min(out_features, o0 + kTile);
    for (int64_t b0 = 0; b0 < batch; b0 += kTile) {
      const int64_t b1 = std::min(batch, b0 + kTile);
      for (int64_t b = b0; b < b1; ++b) {
        T* row = y + b * out_features;
        for (int64_t o = o0; o < o1; ++o) row[o] = yt[o * batch + b];
      }
    }
  }
  return absl::OkStatus();
}

// A 2-d f32/f64 operand, or f16/bf16 where `device` has a native kernel
// for `amp_op` in that dtype (HasNativeLowPrecisionKernel).
absl::Status Check2d(const Tensor& t, const char* op, const char* arg,
                     AmpOp amp_op, Device device) {
  if (t.defined() &&
      internal::HasNativeLowPrecisionKernel(amp_op, t.dtype(), device.type())) {
    TANDEM_RETURN_IF_ERROR(internal::CheckDefined(t, op, arg));
  } else {
    TANDEM_RETURN_IF_ERROR(internal::CheckFloat(t, op, arg));
  }
  if (t.ndim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": `", arg, "` must be 2-d, got ", Describe(t)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b,
                              bool transpose_a, bool transpose_b) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kMatMul, {a, b}, [&](const std::vector<Tensor>& in) {
            return MatMul(in[0], in[1], transpose_a, transpose_b);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("MatMul", a, b));
  TANDEM_RETURN_IF_ERROR(Check2d(a, "MatMul", "a", AmpOp::kMatMul, device));
  TANDEM_RETURN_IF_ERROR(Check2d(b, "MatMul", "b", AmpOp::kMatMul, device));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(a, b, "MatMul"));
  TANDEM_ASSIGN_OR_RETURN(
      const internal::MatMulDims dims,
      internal::MatMulDimsOf(a, b, transpose_a, transpose_b));
  TANDEM_ASSIGN_OR_RETURN(MatMulKernel * gemm, MatMulKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty({dims.m, dims.n}, a.dtype(), device));
  TANDEM_RETURN_IF_ERROR(
      gemm(a, b, transpose_a, transpose_b, GradOut{out, false}));
  if (ShouldRecord({a, b})) {
    // The one backward formula, two more GEMMs of the same row written
    // straight into the gradient buffers (beta = 1 where they accumulate).
    const bool ta = transpose_a, tb = transpose_b;
    RecordOp("MatMul", out, {a, b},
             [sa = a.Detach(), sb = b.Detach(), ta, tb, device](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_RETURN_IF_ERROR(
                   internal::CheckGradDevice(g, device, "MatMul"));
               TANDEM_ASSIGN_OR_RETURN(MatMulKernel * gemm,
                                       MatMulKernels().For(device));
               // C = op(A) op(B), dC = g [m, n].
               if (sink.needs(0)) {
                 TANDEM_ASSIGN_OR_RETURN(GradOut da, sink.GetBuffer(0));
                 // dA [m, k] = g op(B)^T, or dA [k, m] = op(B) g^T.
                 TANDEM_RETURN_IF_ERROR(!ta ? gemm(g, sb, false, !tb, da)
                                            : gemm(sb, g, tb, true, da));
               }
               if (sink.needs(1)) {
                 TANDEM_ASSIGN_OR_RETURN(GradOut db, sink.GetBuffer(1));
                 // dB [k, n] = op(A)^T g, or dB [n, k] = g^T op(A).
                 TANDEM_RETURN_IF_ERROR(!tb ? gemm(sa, g, !ta, false, db)
                                            : gemm(g, sa, true, ta, db));
               }
               return absl::OkStatus();
             });
  }
  return out;
}

absl::StatusOr<Tensor> Linear(const Tensor& x, const Tensor& weight,
                              const Tensor& bias) {
  if (auto routed =
          internal::RouteLowPrecision(AmpOp::kLinear, {x, weight, bias},
                                      [&](const std::vector<Tensor>& in) {
                                        return Linear(in[0], in[1], in[2]);
                                      })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(const Device device,
                          internal::OpDevice("Linear", x, weight, bias));
  TANDEM_RETURN_IF_ERROR(Check2d(x, "Linear", "x", AmpOp::kLinear, device));
  TANDEM_RETURN_IF_ERROR(
      Check2d(weight, "Linear", "weight", AmpOp::kLinear, device));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(x, weight, "Linear"));
  TANDEM_RETURN_IF_ERROR(internal::CheckLinearFeatures(x, weight));
  if (bias.defined()) {
    const int64_t out_features = weight.dim(0);
    TANDEM_RETURN_IF_ERROR(internal::CheckDefined(bias, "Linear", "bias"));
    TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(x, bias, "Linear"));
    if (bias.shape() != Shape{out_features}) {
      return absl::InvalidArgumentError(
          absl::StrCat("Linear: bias ", Describe(bias), " must be [",
                       out_features, "] to match weight ", Describe(weight)));
    }
  }
  TANDEM_ASSIGN_OR_RETURN(LinearKernel * kernel, LinearKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(
      Tensor y, Tensor::Empty({x.dim(0), weight.dim(0)}, x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(x, weight, bias, y));
  if (ShouldRecord({x, weight, bias})) {
    // The one backward formula: dW = g^T x and dx = g W on MatMul's row,
    // db = g's column sums. Only what it reads is kept: x for dW, W for dx.
    Tensor sx = weight.requires_grad() ? x.Detach() : Tensor();
    Tensor sw = x.requires_grad() ? weight.Detach() : Tensor();
    RecordOp("Linear", y, {x, weight, bias},
             [sx, sw, device](const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_RETURN_IF_ERROR(
                   internal::CheckGradDevice(g, device, "Linear"));
               TANDEM_ASSIGN_OR_RETURN(MatMulKernel * gemm,
                                       MatMulKernels().For(device));
               if (sink.needs(1)) {  // dW [out, in] = g^T x
                 TANDEM_ASSIGN_OR_RETURN(GradOut dw, sink.GetBuffer(1));
                 TANDEM_RETURN_IF_ERROR(gemm(g, sx, true, false, dw));
               }
               if (sink.needs(2)) {  // db [out] = column sums of g
                 TANDEM_ASSIGN_OR_RETURN(ColumnSumsKernel * sums,
                                         ColumnSumsKernels().For(device));
                 TANDEM_ASSIGN_OR_RETURN(GradOut db, sink.GetBuffer(2));
                 TANDEM_RETURN_IF_ERROR(sums(g, db));
               }
               if (sink.needs(0)) {  // dx [batch, in] = g W
                 TANDEM_ASSIGN_OR_RETURN(GradOut dx, sink.GetBuffer(0));
                 TANDEM_RETURN_IF_ERROR(gemm(g, sw, false, false, dx));
               }
               return absl::OkStatus();
             });
  }
  return y;
}

namespace {

// The CPU kernels, on arguments checked above.
absl::Status CpuMatMul(const Tensor& a, const Tensor& b, bool transpose_a,
                       bool transpose_b, const GradOut& c) {
  if (a.dtype() == DType::kBF16) {
    return internal::MatMulBf16(a, b, transpose_a, transpose_b, c.tensor,
                                c.accumulate);
  }
  const int64_t m = c.tensor.dim(0), n = c.tensor.dim(1);
  const int64_t k = transpose_a ? a.dim(0) : a.dim(1);
  return DispatchFloat(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    return cpu::Gemm<T>(transpose_a, transpose_b, m, n, k, T(1), a.data<T>(),
                        b.data<T>(), c.accumulate ? T(1) : T(0),
                        c.tensor.data<T>());
  });
}
TANDEM_REGISTER_KERNEL(MatMulKernels(), DeviceType::kCPU, CpuMatMul);

absl::Status CpuLinear(const Tensor& x, const Tensor& weight,
                       const Tensor& bias, const Tensor& y) {
  if (x.dtype() == DType::kBF16) {
    return internal::LinearBf16(x, weight, bias, y);
  }
  const int64_t batch = x.dim(0), in = x.dim(1), out_features = weight.dim(0);
  return DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* py = y.data<T>();
    // kPyTorch: PyTorch's addmm call (the direct form below).
    // Where tandem's skinny kernel takes x W^T (cpu::UseSkinnyGemm), the
    // direct form below reaches it and is faster than the transpose.
    if (std::is_same_v<T, float> && batch <= kTransposedLinearMaxBatch &&
        cpu::GetKernelChoice() == cpu::KernelChoice::kFastest &&
        !cpu::UseSkinnyGemm(false, true, batch, out_features, in)) {
      return LinearForwardTransposed<T>(
          x.data<T>(), weight.data<T>(),
          bias.defined() ? bias.data<T>() : nullptr, batch, in, out_features,
          py);
    }
    // y = bias rows, then y += x W^T (beta = 1); or y = x W^T (beta = 0).
    if (bias.defined()) {
      const T* pb = bias.data<T>();
      for (int64_t r = 0; r < batch; ++r) {
        for (int64_t c = 0; c < out_features; ++c) {
          py[r * out_features + c] = pb[c];
        }
      }
    }
    return cpu::Gemm<T>(false, true, batch, out_features, in, T(1), x.data<T>(),
                        weight.data<T>(), bias.defined() ? T(1) : T(0), py);
  });
}
TANDEM_REGISTER_KERNEL(LinearKernels(), DeviceType::kCPU, CpuLinear);

// In PyTorch's order (grad.sum(0), a cascade sum), then added to an
// existing gradient.
absl::Status CpuColumnSums(const Tensor& g, const GradOut& out) {
  if (g.dtype() == DType::kBF16) {
    internal::ColumnSumsBf16(g, out.tensor, out.accumulate);
    return absl::OkStatus();
  }
  const int64_t rows = g.dim(0), cols = g.dim(1);
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* po = out.tensor.data<T>();
    std::vector<T> sums(static_cast<size_t>(cols));
    internal::ColumnSums(g.data<T>(), rows, cols, sums.data());
    for (int64_t c = 0; c < cols; ++c) {
      po[c] = out.accumulate ? po[c] + sums[c] : sums[c];
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ColumnSumsKernels(), DeviceType::kCPU, CpuColumnSums);

}  // namespace
}  // namespace tandem
