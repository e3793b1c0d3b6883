// Permute's CUDA kernel in the kernel table: the op's definition
// (tensor/ops/permute.cc) checked `dims` and allocated `out` on the device,
// and records autograd itself; this builds a strided plan and queues
// permute.cu's gather on the thread's current stream.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/dispatch/permute_kernels.h"

namespace tandem::cuda::internal {
namespace {

// out's dims with x's strides (elements), size-1 dims dropped and each run
// of dims that stays contiguous in x merged into one (so [B, T, H, hd] ->
// [B, H, T, hd] is a rank-4 plan, and a kept inner block is one dim).
absl::StatusOr<kernels::PermutePlan> Plan(const Tensor& x,
                                          const std::vector<int64_t>& dims) {
  const int64_t n = x.ndim();
  std::vector<int64_t> in_stride(static_cast<size_t>(n), 1);
  for (int64_t d = n - 2; d >= 0; --d) {
    in_stride[d] = in_stride[d + 1] * x.dim(d + 1);
  }
  std::vector<int64_t> size, stride;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = x.dim(dims[k]);
    const int64_t st = in_stride[dims[k]];
    if (s == 1) continue;
    if (!size.empty() && stride.back() == st * s) {
      size.back() *= s;
      stride.back() = st;
      continue;
    }
    size.push_back(s);
    stride.push_back(st);
  }
  if (static_cast<int64_t>(size.size()) > kernels::kPermuteMaxRank) {
    return absl::UnimplementedError(absl::StrCat(
        "Permute on ", x.device().ToString(), ": dims (",
        absl::StrJoin(dims, ", "), ") of a rank-", n, " tensor leave ",
        size.size(),
        " dims that cannot be merged; the CUDA kernel takes at "
        "most ",
        kernels::kPermuteMaxRank,
        ". Permute on the CPU, or in two steps of fewer moved dims"));
  }
  kernels::PermutePlan plan;
  plan.rank = static_cast<int>(size.size());
  for (size_t d = 0; d < size.size(); ++d) {
    plan.size[d] = size[d];
    plan.stride[d] = stride[d];
  }
  return plan;
}

absl::Status CudaPermute(const Tensor& x, const std::vector<int64_t>& dims,
                         const Tensor& out) {
  if (out.numel() == 0) return absl::OkStatus();
  TANDEM_ASSIGN_OR_RETURN(const kernels::PermutePlan plan, Plan(x, dims));
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(out.device().index()));
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::Permute(DTypeSize(x.dtype()), plan,
                                               x.raw_data(), out.raw_data(),
                                               out.numel(), stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(PermuteKernels(), DeviceType::kCUDA, CudaPermute);

}  // namespace
}  // namespace tandem::cuda::internal
