// Gelu's CUDA kernels in the kernel table: the op's definition
// (tensor/ops/gelu.cc) checked the arguments and allocated the output on
// the device; these queue gelu.cu's kernels on the thread's current stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/types/span.h"
#include "base/status_macros.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/op_kernels.h"

namespace tandem::cuda {
namespace kernels {

// gelu.cu (compiled by nvcc; its only caller is this file).
cudaError_t GeluForward(DType dtype, bool tanh_form, const void* x, void* y,
                        int64_t n, cudaStream_t stream);
cudaError_t GeluBackward(DType dtype, bool tanh_form, const void* g,
                         const void* x, void* gx, int64_t n,
                         cudaStream_t stream);

}  // namespace kernels

namespace internal {
namespace {

// in = {x}; attr 1 selects the tanh approximation.
absl::Status CudaGelu(const Tensor& out, absl::Span<const Tensor> in,
                      double attr) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(out.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::GeluForward(out.dtype(), attr != 0, in[0].raw_data(),
                           out.raw_data(), out.numel(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(GeluKernels(), DeviceType::kCUDA, CudaGelu);

// in = {g, x}.
absl::Status CudaGeluBackward(const Tensor& out, absl::Span<const Tensor> in,
                              double attr) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(out.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::GeluBackward(
      out.dtype(), attr != 0, in[0].raw_data(), in[1].raw_data(),
      out.raw_data(), out.numel(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(GeluBackwardKernels(), DeviceType::kCUDA,
                       CudaGeluBackward);

}  // namespace
}  // namespace internal
}  // namespace tandem::cuda
