// CUDA ops: Add/Sub/Mul/Div with broadcasting, unary functions, in-place
// updates, fill and dtype conversion.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd.h"
#include "tensor/convert.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops_internal.h"

namespace tandem::cuda::internal {
namespace {

using ::tandem::internal::BroadcastOperand;
using ::tandem::internal::BroadcastPlan;

kernels::Broadcast ToKernel(const BroadcastPlan& p) {
  kernels::Broadcast k;
  k.outer = p.outer;
  k.inner = p.inner;
  k.a_outer = p.a.outer_stride;
  k.a_inner = p.a.inner_stride;
  k.b_outer = p.b.outer_stride;
  k.b_inner = p.b.inner_stride;
  return k;
}

absl::Status BinaryBackward(BinaryOp op, const BroadcastPlan& plan,
                            Device device, const Tensor& a, const Tensor& b,
                            const Tensor& g, GradSink& sink) {
  TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, BinaryOpName(op)));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  const kernels::Broadcast kp = ToKernel(plan);
  for (int i = 0; i < 2; ++i) {
    if (!sink.needs(i)) continue;
    const BroadcastOperand& x = i == 0 ? plan.a : plan.b;
    // Pass-through gradients of equal-shape operands, without a copy.
    if (!x.broadcast &&
        ((i == 0 && (op == BinaryOp::kAdd || op == BinaryOp::kSub)) ||
         (i == 1 && op == BinaryOp::kAdd))) {
      TANDEM_RETURN_IF_ERROR(sink.Add(i, g));
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(i));
    Tensor scratch;
    if (x.outer_stride == 0 && x.inner_stride == 0) {
      TANDEM_ASSIGN_OR_RETURN(scratch, ReduceScratch(device));
    }
    TANDEM_CUDA_RETURN_IF_ERROR(kernels::BinaryBackward(
        op, i, g.dtype(), kp, a.defined() ? a.raw_data() : nullptr,
        b.defined() ? b.raw_data() : nullptr, g.raw_data(),
        buf.tensor.raw_data(), buf.accumulate,
        scratch.defined() ? scratch.data<double>() : nullptr, stream));
  }
  return absl::OkStatus();
}

// The kernels of tensor/op_kernels.h, on arguments their ops checked.
absl::StatusOr<Tensor> CudaBinary(BinaryOp op, const Tensor& a, const Tensor& b,
                                  const BroadcastPlan& plan) {
  const char* name = BinaryOpName(op);
  const Device device = a.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(plan.out_shape, a.dtype(), device));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::BinaryForward(op, a.dtype(), ToKernel(plan), a.raw_data(),
                             b.raw_data(), out.raw_data(), stream));
  if (ShouldRecord({a, b})) {
    // Only Mul and Div read the operands in backward.
    const bool saves = op == BinaryOp::kMul || op == BinaryOp::kDiv;
    RecordOp(
        name, out, {a, b},
        [op, plan, device, sa = saves ? a.Detach() : Tensor(),
         sb = saves ? b.Detach() : Tensor()](const Tensor& g, GradSink& sink) {
          return BinaryBackward(op, plan, device, sa, sb, g, sink);
        });
  }
  return out;
}

TANDEM_REGISTER_KERNEL(BinaryKernels(), DeviceType::kCUDA, CudaBinary);

absl::StatusOr<Tensor> CudaUnary(UnaryOp op, const Tensor& x, double scalar) {
  const char* name = UnaryOpName(op);
  const Device device = x.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  const auto kop = op;
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::UnaryForward(
      kop, x.dtype(), scalar, x.raw_data(), y.raw_data(), x.numel(), stream));
  if (ShouldRecord({x})) {
    const bool needs_x = op == UnaryOp::kRelu || op == UnaryOp::kLog;
    const bool needs_y =
        op == UnaryOp::kSigmoid || op == UnaryOp::kTanh || op == UnaryOp::kExp;
    RecordOp(
        name, y, {x},
        [name, kop, scalar, device, sx = needs_x ? x.Detach() : Tensor(),
         sy = needs_y ? y.Detach() : Tensor()](const Tensor& g,
                                               GradSink& sink) -> absl::Status {
          TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, name));
          TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
          TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
          TANDEM_CUDA_RETURN_IF_ERROR(kernels::UnaryBackward(
              kop, g.dtype(), scalar, sx.defined() ? sx.raw_data() : nullptr,
              sy.defined() ? sy.raw_data() : nullptr, g.raw_data(),
              buf.tensor.raw_data(), g.numel(), buf.accumulate, stream));
          return absl::OkStatus();
        });
  }
  return y;
}

TANDEM_REGISTER_KERNEL(UnaryKernels(), DeviceType::kCUDA, CudaUnary);

absl::Status CudaAddInPlace(const Tensor& dst, const Tensor& src,
                            double alpha) {
  const Device device = dst.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::AddInPlace(
      dst.dtype(), dst.raw_data(), src.raw_data(), alpha, dst.numel(), stream));
  return absl::OkStatus();
}

TANDEM_REGISTER_KERNEL(AddInPlaceKernels(), DeviceType::kCUDA, CudaAddInPlace);

absl::Status CudaScaleInPlace(const Tensor& dst, double factor) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(dst.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::Scale(dst.dtype(), dst.raw_data(), factor, dst.numel(), stream));
  return absl::OkStatus();
}

TANDEM_REGISTER_KERNEL(ScaleInPlaceKernels(), DeviceType::kCUDA,
                       CudaScaleInPlace);

absl::Status CudaFillInPlace(const Tensor& dst, double value) {
  // The element's bytes, converted on the host by the CPU's rules.
  uint64_t pattern = 0;
  ::tandem::internal::FillElements(&pattern, dst.dtype(), 1, value);
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(dst.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::Fill(
      dst.raw_data(), dst.numel(), DTypeSize(dst.dtype()), pattern, stream));
  return absl::OkStatus();
}

TANDEM_REGISTER_KERNEL(FillInPlaceKernels(), DeviceType::kCUDA,
                       CudaFillInPlace);

// Tensor::To(DType) made dst on src's device with src's element count.
absl::Status CudaConvert(const Tensor& src, const Tensor& dst) {
  const Device device = src.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  if (src.dtype() == dst.dtype()) {
    if (src.raw_data() == dst.raw_data() || src.numel() == 0) {
      return absl::OkStatus();
    }
    TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        dst.raw_data(), src.raw_data(), static_cast<size_t>(src.nbytes()),
        cudaMemcpyDeviceToDevice, stream));
    return absl::OkStatus();
  }
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::Convert(src.raw_data(), src.dtype(),
                                               dst.raw_data(), dst.dtype(),
                                               src.numel(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ConvertKernels(), DeviceType::kCUDA, CudaConvert);

}  // namespace
}  // namespace tandem::cuda::internal
