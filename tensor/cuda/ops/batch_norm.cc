// BatchNorm's CUDA kernels in the kernel table: the definitions
// (tensor/ops/batch_norm.cc) checked the arguments and allocated the
// outputs on the device; these queue batch_norm.cu's kernels on the
// thread's current stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/types/span.h"
#include "base/status_macros.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/dispatch/op_table.h"

namespace tandem::cuda {
namespace kernels {

// batch_norm.cu (compiled by nvcc; its only caller is this file).
cudaError_t BatchNormStats(DType dtype, const void* x, int64_t batch,
                           int64_t channels, int64_t inner, void* mean,
                           void* var, cudaStream_t stream);
cudaError_t BatchNormGatherStats(DType dtype, const void* means,
                                 const void* vars, const void* counts,
                                 int64_t groups, int64_t channels,
                                 void* running_mean, void* running_var,
                                 double momentum, double eps, void* mean,
                                 void* invstd, cudaStream_t stream);
cudaError_t BatchNormElemt(DType dtype, const void* x, const void* weight,
                           const void* bias, const void* mean,
                           const void* invstd, int64_t channels, int64_t inner,
                           int64_t n, void* y, cudaStream_t stream);
cudaError_t BatchNormBackwardReduce(DType dtype, const void* dy, const void* x,
                                    const void* mean, int64_t batch,
                                    int64_t channels, int64_t inner,
                                    void* sum_dy, void* sum_dy_xmu,
                                    cudaStream_t stream);
cudaError_t BatchNormBackwardElemt(DType dtype, const void* dy, const void* x,
                                   const void* mean, const void* invstd,
                                   const void* weight, const void* sum_dy,
                                   const void* sum_dy_xmu, double count,
                                   int64_t channels, int64_t inner, int64_t n,
                                   void* dx, cudaStream_t stream);
cudaError_t BatchNormInvstd(DType dtype, const void* var, double eps, int64_t n,
                            void* out, cudaStream_t stream);

}  // namespace kernels

namespace internal {
namespace {

// x [N, C, *] is split at dim 1: (outer, size, inner) = (N, C, prod(*)).
absl::Status CudaStats(const Tensor& x, const Tensor& mean, const Tensor& var) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  const ::tandem::internal::DimSplit p =
      ::tandem::internal::SplitAt(x.shape(), 1);
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::BatchNormStats(x.dtype(), x.raw_data(), p.outer, p.size, p.inner,
                              mean.raw_data(), var.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormStatsKernels(), DeviceType::kCUDA, CudaStats);

absl::Status CudaGatherStats(const Tensor& means, const Tensor& vars,
                             const Tensor& counts, const Tensor& running_mean,
                             const Tensor& running_var, double momentum,
                             double eps, const Tensor& mean,
                             const Tensor& invstd) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(means.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::BatchNormGatherStats(
      means.dtype(), means.raw_data(), vars.raw_data(), counts.raw_data(),
      means.dim(0), means.dim(1), running_mean.raw_data(),
      running_var.raw_data(), momentum, eps, mean.raw_data(), invstd.raw_data(),
      stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormGatherStatsKernels(), DeviceType::kCUDA,
                       CudaGatherStats);

absl::Status CudaElemt(const Tensor& out, const Tensor& x, const Tensor& weight,
                       const Tensor& bias, const Tensor& mean,
                       const Tensor& invstd) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  const ::tandem::internal::DimSplit p =
      ::tandem::internal::SplitAt(x.shape(), 1);
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::BatchNormElemt(
      x.dtype(), x.raw_data(), weight.raw_data(), bias.raw_data(),
      mean.raw_data(), invstd.raw_data(), p.size, p.inner, x.numel(),
      out.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormElemtKernels(), DeviceType::kCUDA, CudaElemt);

absl::Status CudaBackwardReduce(const Tensor& dy, const Tensor& x,
                                const Tensor& mean, const Tensor& sum_dy,
                                const Tensor& sum_dy_xmu) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  const ::tandem::internal::DimSplit p =
      ::tandem::internal::SplitAt(x.shape(), 1);
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::BatchNormBackwardReduce(
      x.dtype(), dy.raw_data(), x.raw_data(), mean.raw_data(), p.outer, p.size,
      p.inner, sum_dy.raw_data(), sum_dy_xmu.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormBackwardReduceKernels(), DeviceType::kCUDA,
                       CudaBackwardReduce);

absl::Status CudaBackwardElemt(const Tensor& dx, const Tensor& dy,
                               const Tensor& x, const Tensor& mean,
                               const Tensor& invstd, const Tensor& weight,
                               const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                               double count) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  const ::tandem::internal::DimSplit p =
      ::tandem::internal::SplitAt(x.shape(), 1);
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::BatchNormBackwardElemt(
      x.dtype(), dy.raw_data(), x.raw_data(), mean.raw_data(),
      invstd.raw_data(), weight.raw_data(), sum_dy.raw_data(),
      sum_dy_xmu.raw_data(), count, p.size, p.inner, x.numel(), dx.raw_data(),
      stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormBackwardElemtKernels(), DeviceType::kCUDA,
                       CudaBackwardElemt);

// in = {var}, attr = eps.
absl::Status CudaInvstd(const Tensor& out, absl::Span<const Tensor> in,
                        double eps) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(out.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::BatchNormInvstd(
      out.dtype(), in[0].raw_data(), eps, out.numel(), out.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BatchNormInvstdKernels(), DeviceType::kCUDA, CudaInvstd);

}  // namespace
}  // namespace internal
}  // namespace tandem::cuda
