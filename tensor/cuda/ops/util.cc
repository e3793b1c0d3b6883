// The reduction scratch shared by the CUDA kernels.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/ops/internal.h"

namespace tandem::cuda::internal {

absl::StatusOr<Tensor> ReduceScratch(Device device) {
  return Tensor::Empty({kernels::kReduceScratch}, DType::kF64, device);
}

}  // namespace tandem::cuda::internal
