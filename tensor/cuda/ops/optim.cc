// CUDA ops: fused Sgd and AdamW updates (tensor/cuda/kernels/optim.cu), one
// kernel per parameter, on the thread's current stream.
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/cuda/internal/kernels.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/ops/internal.h"

namespace tandem::cuda::internal {
namespace {

using ::tandem::internal::Describe;

// `t` matches the parameter (device, dtype f32/f64, element count): the
// optimizer state it made, checked before the kernel trusts its sizes.
absl::Status CheckLike(const Tensor& t, const Tensor& param, const char* op,
                       const char* arg) {
  TANDEM_RETURN_IF_ERROR(::tandem::internal::CheckDefined(t, op, arg));
  if (t.device() != param.device()) {
    return ::tandem::internal::DeviceMismatch(op, param.device(), t.device());
  }
  if (t.dtype() != param.dtype() || t.numel() != param.numel()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": `", arg, "` is ", Describe(t), " but the parameter is ",
        Describe(param), "; they must match"));
  }
  return absl::OkStatus();
}

absl::Status CheckParam(const Tensor& param, const char* op) {
  TANDEM_RETURN_IF_ERROR(::tandem::internal::CheckDefined(param, op, "param"));
  if (param.dtype() != DType::kF32 && param.dtype() != DType::kF64) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": parameter ", Describe(param), " must be f32 or f64"));
  }
  return absl::OkStatus();
}

// The kernels of tensor/dispatch/op_kernels.h.
absl::Status CudaSgdStep(const Tensor& param, const Tensor& grad,
                         const Tensor& buffer, const SgdStepArgs& args) {
  TANDEM_RETURN_IF_ERROR(CheckParam(param, "Sgd::Step"));
  TANDEM_RETURN_IF_ERROR(CheckLike(grad, param, "Sgd::Step", "grad"));
  if (buffer.defined()) {
    TANDEM_RETURN_IF_ERROR(
        CheckLike(buffer, param, "Sgd::Step", "momentum buffer"));
  }
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(param.device().index()));
  kernels::SgdArgs k;
  k.lr = args.lr;
  k.momentum = args.momentum;
  k.dampening = args.dampening;
  k.weight_decay = args.weight_decay;
  k.nesterov = args.nesterov;
  k.maximize = args.maximize;
  k.first = args.first;
  TANDEM_CUDA_RETURN_IF_ERROR(
      kernels::SgdStep(param.dtype(), param.raw_data(), grad.raw_data(),
                       buffer.defined() ? buffer.raw_data() : nullptr,
                       param.numel(), k, stream));
  return absl::OkStatus();
}

TANDEM_REGISTER_KERNEL(SgdStepKernels(), DeviceType::kCUDA, CudaSgdStep);

absl::Status CudaAdamWStep(const Tensor& param, const Tensor& grad,
                           const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& max_exp_avg_sq,
                           const AdamWStepArgs& args) {
  TANDEM_RETURN_IF_ERROR(CheckParam(param, "AdamW::Step"));
  TANDEM_RETURN_IF_ERROR(CheckLike(grad, param, "AdamW::Step", "grad"));
  TANDEM_RETURN_IF_ERROR(CheckLike(exp_avg, param, "AdamW::Step", "exp_avg"));
  TANDEM_RETURN_IF_ERROR(
      CheckLike(exp_avg_sq, param, "AdamW::Step", "exp_avg_sq"));
  if (args.amsgrad) {
    TANDEM_RETURN_IF_ERROR(
        CheckLike(max_exp_avg_sq, param, "AdamW::Step", "max_exp_avg_sq"));
  }
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(param.device().index()));
  kernels::AdamWArgs k;
  k.beta1 = args.beta1;
  k.beta2 = args.beta2;
  k.eps = args.eps;
  k.decay = args.decay;
  k.step_size = args.step_size;
  k.bias2_sqrt = args.bias2_sqrt;
  k.maximize = args.maximize;
  TANDEM_CUDA_RETURN_IF_ERROR(kernels::AdamWStep(
      param.dtype(), param.raw_data(), grad.raw_data(), exp_avg.raw_data(),
      exp_avg_sq.raw_data(), args.amsgrad ? max_exp_avg_sq.raw_data() : nullptr,
      param.numel(), k, stream));
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(AdamWStepKernels(), DeviceType::kCUDA, CudaAdamWStep);

}  // namespace
}  // namespace tandem::cuda::internal
