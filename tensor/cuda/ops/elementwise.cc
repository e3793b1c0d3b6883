// CUDA ops: Add/Sub/Mul/Div with broadcasting, unary functions, in-place
// updates, fill and dtype conversion.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/convert.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops/internal.h"

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

// The kernels of tensor/dispatch/op_kernels.h, on arguments their ops checked.
absl::Status CudaBinary(BinaryOp op, const Tensor& a, const Tensor& b,
                        const BroadcastPlan& plan, const Tensor& out) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(a.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::BinaryForward(op, a.dtype(), ToKernel(plan), a.raw_data(),
                             b.raw_data(), out.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BinaryKernels(), DeviceType::kCUDA, CudaBinary);

absl::Status CudaBinaryBackward(BinaryOp op, int input, const Tensor& a,
                                const Tensor& b, const Tensor& g,
                                const BroadcastPlan& plan, const GradOut& buf) {
  const Device device = g.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  const BroadcastOperand& x = input == 0 ? plan.a : plan.b;
  Tensor scratch;
  if (x.outer_stride == 0 && x.inner_stride == 0) {
    TANDEM_ASSIGN_OR_RETURN(scratch, ReduceScratch(device));
  }
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::BinaryBackward(
      op, input, g.dtype(), ToKernel(plan),
      a.defined() ? a.raw_data() : nullptr,
      b.defined() ? b.raw_data() : nullptr, g.raw_data(), buf.tensor.raw_data(),
      buf.accumulate, scratch.defined() ? scratch.data<double>() : nullptr,
      stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BinaryBackwardKernels(), DeviceType::kCUDA,
                       CudaBinaryBackward);

absl::Status CudaUnary(UnaryOp op, const Tensor& x, double scalar,
                       const Tensor& y) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::UnaryForward(
      op, x.dtype(), scalar, x.raw_data(), y.raw_data(), x.numel(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(UnaryKernels(), DeviceType::kCUDA, CudaUnary);

absl::Status CudaUnaryBackward(UnaryOp op, double scalar, const Tensor& x,
                               const Tensor& y, const Tensor& g,
                               const GradOut& buf) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::UnaryBackward(
      op, g.dtype(), scalar, x.defined() ? x.raw_data() : nullptr,
      y.defined() ? y.raw_data() : nullptr, g.raw_data(), buf.tensor.raw_data(),
      g.numel(), buf.accumulate, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(UnaryBackwardKernels(), DeviceType::kCUDA,
                       CudaUnaryBackward);

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
