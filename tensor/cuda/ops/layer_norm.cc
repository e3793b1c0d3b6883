// LayerNorm's CUDA kernels in the kernel table: the definition
// (tensor/ops/layer_norm.cc) checked the arguments and allocated the
// outputs on the device; these queue layer_norm.cu's kernels on the
// thread's current stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/dispatch/op_table.h"

namespace tandem::cuda {
namespace kernels {

// layer_norm.cu (compiled by nvcc; its only caller is this file).
cudaError_t LayerNormForward(DType dtype, const void* x, const void* weight,
                             const void* bias, int64_t rows, int64_t cols,
                             double eps, void* y, void* mean, void* rstd,
                             cudaStream_t stream);
cudaError_t LayerNormBackward(DType dtype, const void* dy, const void* x,
                              const void* mean, const void* rstd,
                              const void* weight, int64_t rows, int64_t cols,
                              void* dx, void* dweight, void* dbias,
                              cudaStream_t stream);

}  // namespace kernels

namespace internal {
namespace {

absl::Status CudaLayerNorm(const Tensor& x, const Tensor& weight,
                           const Tensor& bias, int64_t cols, double eps,
                           const Tensor& y, const Tensor& mean,
                           const Tensor& rstd) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::LayerNormForward(
      x.dtype(), x.raw_data(), weight.raw_data(), bias.raw_data(), mean.numel(),
      cols, eps, y.raw_data(), mean.raw_data(), rstd.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(LayerNormKernels(), DeviceType::kCUDA, CudaLayerNorm);

absl::Status CudaLayerNormBackward(const Tensor& dy, const Tensor& x,
                                   const Tensor& mean, const Tensor& rstd,
                                   const Tensor& weight, int64_t cols,
                                   const Tensor& dx, const Tensor& dweight,
                                   const Tensor& dbias) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(x.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::LayerNormBackward(
      x.dtype(), dy.raw_data(), x.raw_data(), mean.raw_data(), rstd.raw_data(),
      weight.raw_data(), mean.numel(), cols, dx.raw_data(), dweight.raw_data(),
      dbias.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(LayerNormBackwardKernels(), DeviceType::kCUDA,
                       CudaLayerNormBackward);

}  // namespace
}  // namespace internal
}  // namespace tandem::cuda
