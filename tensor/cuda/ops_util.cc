// Argument checks and scratch shared by the CUDA ops.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/ops_internal.h"

namespace tandem::cuda::internal {

using ::tandem::internal::Describe;

absl::Status CheckOn(const Tensor& t, Device device, const char* op,
                     const char* arg) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": `", arg, "` is an undefined tensor"));
  }
  if (t.device() != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` ", Describe(t), " is on ", t.device().ToString(),
        " but the op runs on ", device.ToString(),
        "; every input must be on one device (move it with To(Device))"));
  }
  return absl::OkStatus();
}

absl::Status CheckFloatOn(const Tensor& t, Device device, const char* op,
                          const char* arg) {
  absl::Status s = CheckOn(t, device, op, arg);
  if (!s.ok()) return s;
  if (!IsFloatingPoint(t.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` is ", Describe(t),
        " but this op supports f32, f64, f16 and bf16 on CUDA; convert with "
        "To(DType)"));
  }
  return absl::OkStatus();
}

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
