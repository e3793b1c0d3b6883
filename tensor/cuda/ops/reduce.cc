// CUDA ops: Sum, Mean (all elements or one dim), Argmax, Softmax and
// LogSoftmax.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops/internal.h"

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

// The kernels of tensor/dispatch/op_kernels.h, on arguments their ops checked
// (dims normalised).
absl::Status CudaSumAll(const Tensor& x, bool mean, const Tensor& out) {
  const Device device = x.device();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(device.index()));
  TANDEM_ASSIGN_OR_RETURN(Tensor scratch, ReduceScratch(device));
  const int64_t n = x.numel();
  // Mean of nothing is 0/0 = NaN, as in PyTorch.
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumAll(
      x.dtype(), x.raw_data(), n, mean ? static_cast<double>(n) : 1.0,
      x.dtype(), out.raw_data(), /*accumulate=*/false, scratch.data<double>(),
      stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumAllKernels(), DeviceType::kCUDA, CudaSumAll);

absl::Status CudaSumAllBackward(const Tensor& g, bool mean,
                                const GradOut& buf) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::SumAllBackward(g.dtype(), g.raw_data(), buf.tensor.numel(), mean,
                              buf.tensor.raw_data(), buf.accumulate, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumAllBackwardKernels(), DeviceType::kCUDA,
                       CudaSumAllBackward);

absl::Status CudaSumDim(const Tensor& x, int64_t d, bool mean,
                        const Tensor& out) {
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(x.shape(), d));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SumDim(x.dtype(), x.raw_data(), s, mean,
                                              out.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumDimKernels(), DeviceType::kCUDA, CudaSumDim);

absl::Status CudaSumDimBackward(const Tensor& g, int64_t d, bool mean,
                                const GradOut& buf) {
  const kernels::Split s =
      ToKernel(::tandem::internal::SplitAt(buf.tensor.shape(), d));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::SumDimBackward(g.dtype(), g.raw_data(), s, mean,
                              buf.tensor.raw_data(), buf.accumulate, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SumDimBackwardKernels(), DeviceType::kCUDA,
                       CudaSumDimBackward);

absl::Status CudaSoftmax(const Tensor& x, int64_t d, bool log,
                         const Tensor& y) {
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(x.shape(), d));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::SoftmaxForward(
      x.dtype(), log, x.raw_data(), s, y.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SoftmaxKernels(), DeviceType::kCUDA, CudaSoftmax);

absl::Status CudaSoftmaxBackward(const Tensor& g, const Tensor& y, int64_t d,
                                 bool log, const GradOut& buf) {
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(y.shape(), d));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(g.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::SoftmaxBackward(g.dtype(), log, y.raw_data(), g.raw_data(), s,
                               buf.tensor.raw_data(), buf.accumulate, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(SoftmaxBackwardKernels(), DeviceType::kCUDA,
                       CudaSoftmaxBackward);

absl::Status CudaArgmax(const Tensor& x, int64_t d, const Tensor& out) {
  const kernels::Split s = ToKernel(::tandem::internal::SplitAt(x.shape(), d));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::Argmax(x.dtype(), x.raw_data(), s, out.data<int64_t>(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(ArgmaxKernels(), DeviceType::kCUDA, CudaArgmax);

}  // namespace
}  // namespace tandem::cuda::internal
