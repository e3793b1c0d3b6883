// Embedding's CUDA kernels in the kernel table: the op's definition
// (tensor/ops/embedding.cc) checked the arguments (the indices' range
// included) and allocated the output on the device; these queue
// embedding.cu's kernels on the thread's current stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/types/span.h"
#include "base/status_macros.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/op_kernels.h"

namespace tandem::cuda {
namespace kernels {

// embedding.cu (compiled by nvcc; its only caller is this file).
cudaError_t EmbeddingForward(DType dtype, DType index_dtype, const void* idx,
                             const void* w, void* y, int64_t n, int64_t d,
                             cudaStream_t stream);
cudaError_t EmbeddingBackward(DType dtype, DType index_dtype, const void* g,
                              const void* idx, void* gw, int64_t n, int64_t d,
                              cudaStream_t stream);

}  // namespace kernels

namespace internal {
namespace {

// out [n, D]; in = {indices (n elements), weight [V, D]}.
absl::Status CudaEmbedding(const Tensor& out, absl::Span<const Tensor> in,
                           double /*attr*/) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(out.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::EmbeddingForward(
      out.dtype(), in[0].dtype(), in[0].raw_data(), in[1].raw_data(),
      out.raw_data(), in[0].numel(), in[1].dim(1), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(EmbeddingKernels(), DeviceType::kCUDA, CudaEmbedding);

// out [V, D] (zeros); in = {g [n, D], indices}.
absl::Status CudaEmbeddingBackward(const Tensor& out,
                                   absl::Span<const Tensor> in,
                                   double /*attr*/) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(out.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::EmbeddingBackward(
      out.dtype(), in[1].dtype(), in[0].raw_data(), in[1].raw_data(),
      out.raw_data(), in[1].numel(), out.dim(1), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(EmbeddingBackwardKernels(), DeviceType::kCUDA,
                       CudaEmbeddingBackward);

}  // namespace
}  // namespace internal
}  // namespace tandem::cuda
