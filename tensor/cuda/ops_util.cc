// The gradient check and scratch shared by the CUDA kernels.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/ops_internal.h"

namespace tandem::cuda::internal {

absl::Status CheckGrad(const Tensor& g, Device device, const char* op) {
  if (!g.defined() || g.device() != device) {
    return absl::InternalError(
        absl::StrCat("the backward of ", op, " on ", device.ToString(),
                     " received a gradient on ",
                     g.defined() ? g.device().ToString() : "(undefined)",
                     "; gradients must stay on the op's device"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ReduceScratch(Device device) {
  return Tensor::Empty({kernels::kReduceScratch}, DType::kF64, device);
}

}  // namespace tandem::cuda::internal
