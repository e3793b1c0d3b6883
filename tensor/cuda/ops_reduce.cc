// CUDA ops: Sum, Mean (all elements or one dim), Argmax, Softmax and
// LogSoftmax.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/autograd.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops_internal.h"

namespace tandem::cuda::internal {
namespace {

using ::tandem::internal::DimSplit;

kernels::Split ToKernel(const DimSplit& s) {
  kernels::Split k;
  k.outer = s.outer;
  k.size = s.size;
  k.inner = s.inner;
  return k;
}

// The kernels of tensor/op_kernels.h, on arguments their ops checked
// (dims normalised).
absl::StatusOr<Tensor> CudaSumAll(const Tensor& x, bool mean) {
  const char* name = mean ? "Mean" : "Sum";
  const Device device = x.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty({}, x.dtype(), device));
  TANDEM_ASSIGN_OR_RETURN(Tensor scratch, ReduceScratch(device));
  const int64_t n = x.numel();
  // Mean of nothing is 0/0 = NaN, as in PyTorch.
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumAll(
      x.dtype(), x.raw_data(), n, mean ? static_cast<double>(n) : 1.0,
      x.dtype(), out.raw_data(), /*accumulate=*/false, scratch.data<double>(),
      stream));
  RecordOp(
      name, out, {x},
      [name, mean, n, device](const Tensor& g, GradSink& sink) -> absl::Status {
        TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, name));
        TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
        TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
        TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumAllBackward(
            g.dtype(), g.raw_data(), n, mean, buf.tensor.raw_data(),
            buf.accumulate, stream));
        return absl::OkStatus();
      });
  return out;
}

TANDEM_REGISTER_KERNEL(SumAllKernels(), DeviceType::kCUDA, CudaSumAll);

absl::StatusOr<Tensor> CudaSumDim(const Tensor& x, int64_t d, bool keepdim,
                                  bool mean) {
  const char* name = mean ? "Mean" : "Sum";
  const Device device = x.device();
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(x.shape(), d));
  Shape out_shape = x.shape();
  if (keepdim) {
    out_shape[d] = 1;
  } else {
    out_shape.erase(out_shape.begin() + d);
  }
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(out_shape, x.dtype(), device));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumDim(x.dtype(), x.raw_data(), s, mean,
                                              out.raw_data(), stream));
  RecordOp(
      name, out, {x},
      [name, mean, s, device](const Tensor& g, GradSink& sink) -> absl::Status {
        TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, name));
        TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
        TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
        TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumDimBackward(
            g.dtype(), g.raw_data(), s, mean, buf.tensor.raw_data(),
            buf.accumulate, stream));
        return absl::OkStatus();
      });
  return out;
}

TANDEM_REGISTER_KERNEL(SumDimKernels(), DeviceType::kCUDA, CudaSumDim);

absl::StatusOr<Tensor> CudaSoftmax(const Tensor& x, int64_t d, bool log) {
  const char* name = log ? "LogSoftmax" : "Softmax";
  const Device device = x.device();
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(x.shape(), d));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SoftmaxForward(
      x.dtype(), log, x.raw_data(), s, y.raw_data(), stream));
  RecordOp(name, y, {x},
           [name, log, s, device, sy = y.Detach()](
               const Tensor& g, GradSink& sink) -> absl::Status {
             TANDEM_RETURN_IF_ERROR(CheckGrad(g, device, name));
             TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream,
                                     Enter(device.index()));
             TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
             TANDEM_CUDA_RETURN_IF_ERROR(kernels::SoftmaxBackward(
                 g.dtype(), log, sy.raw_data(), g.raw_data(), s,
                 buf.tensor.raw_data(), buf.accumulate, stream));
             return absl::OkStatus();
           });
  return y;
}

TANDEM_REGISTER_KERNEL(SoftmaxKernels(), DeviceType::kCUDA, CudaSoftmax);

absl::StatusOr<Tensor> CudaArgmax(const Tensor& x, int64_t d) {
  const Device device = x.device();
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(x.shape(), d));
  Shape out_shape = x.shape();
  out_shape.erase(out_shape.begin() + d);
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(out_shape, DType::kI64, device));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::Argmax(x.dtype(), x.raw_data(), s, out.data<int64_t>(), stream));
  return out;
}
TANDEM_REGISTER_KERNEL(ArgmaxKernels(), DeviceType::kCUDA, CudaArgmax);

}  // namespace
}  // namespace tandem::cuda::internal
