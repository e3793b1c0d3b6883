// ScaledDotProductAttention's CUDA kernels in the kernel table
// (tensor/dispatch/attention_kernels.h): the op's definition
// (tensor/ops/attention.cc) checked the arguments and allocated the outputs
// on the device; these queue attention.cu's kernels on the thread's
// current stream.
#include <cuda_runtime.h>

#include <cstdint>

#include "base/status_macros.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/attention_kernels.h"

namespace tandem::cuda {
namespace kernels {

// attention.cu (compiled by nvcc; its only caller is this file).
cudaError_t AttentionForward(DType dtype, const void* q, const void* k,
                             const void* v, const void* mask, int64_t bh,
                             int64_t t, int64_t hd, bool causal, double scale,
                             void* probs, void* y, cudaStream_t stream);
// scratch: bh * t * (1 + 2 * hd) doubles on the device.
cudaError_t AttentionBackward(DType dtype, const void* gy, const void* q,
                              const void* k, const void* v, const void* probs,
                              const void* mask, int64_t bh, int64_t t,
                              int64_t hd, bool causal, double scale,
                              double* scratch, void* gq, void* gk, void* gv,
                              cudaStream_t stream);

}  // namespace kernels

namespace internal {
namespace {

const void* RawOrNull(const Tensor& t) {
  return t.defined() ? t.raw_data() : nullptr;
}

absl::Status CudaAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& mask, bool causal, double scale,
                           const Tensor& probs, const Tensor& y) {
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(q.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::AttentionForward(
      q.dtype(), q.raw_data(), k.raw_data(), v.raw_data(), RawOrNull(mask),
      q.dim(0) * q.dim(1), q.dim(2), q.dim(3), causal, scale, probs.raw_data(),
      y.raw_data(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(AttentionForwardKernels(), DeviceType::kCUDA,
                       CudaAttention);

absl::Status CudaAttentionBackward(const Tensor& gy, const Tensor& q,
                                   const Tensor& k, const Tensor& v,
                                   const Tensor& probs, const Tensor& mask,
                                   bool causal, double scale, const Tensor& gq,
                                   const Tensor& gk, const Tensor& gv) {
  const int64_t bh = q.dim(0) * q.dim(1), t = q.dim(2), hd = q.dim(3);
  TANDEM_ASSIGN_OR_RETURN(
      Tensor scratch,
      Tensor::Empty({bh * t * (1 + 2 * hd)}, DType::kF64, q.device()));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(q.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::AttentionBackward(
      q.dtype(), gy.raw_data(), q.raw_data(), k.raw_data(), v.raw_data(),
      probs.raw_data(), RawOrNull(mask), bh, t, hd, causal, scale,
      scratch.data<double>(), gq.raw_data(), gk.raw_data(), gv.raw_data(),
      stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(AttentionBackwardKernels(), DeviceType::kCUDA,
                       CudaAttentionBackward);

}  // namespace
}  // namespace internal
}  // namespace tandem::cuda
