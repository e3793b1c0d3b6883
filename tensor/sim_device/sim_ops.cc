// The kernels of simulated devices: each runs the CPU kernel of its row on
// host views of its tensors (which the op's definition checked to share one
// simulated device and allocated there), so every value is bit for bit the
// CPU's and every output and gradient of a simulated tensor is simulated.
// The kernels record no autograd: each op's definition does.
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "tensor/convert.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/dispatch/op_table.h"
#include "tensor/dispatch/permute_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"
#include "tensor/optim/update_kernels.h"
#include "tensor/sim_device/sim_internal.h"
#include "tensor/tensor.h"

namespace tandem::sim_internal {
namespace {

// A non-recording host view (in-place ops, optimizer steps).
Tensor Raw(const Tensor& t) {
  return t.defined() ? Relabel(t, Device::CPU()) : t;
}

// The kernels of the rows whose CPU kernels do not fit ViaCpu below: each
// op's definition has checked that its tensors share one simulated device.
absl::Status SimAddInPlace(const Tensor& dst, const Tensor& src, double alpha) {
  return ::tandem::AddInPlace(Raw(dst), Raw(src), alpha);
}
absl::Status SimScaleInPlace(const Tensor& dst, double factor) {
  return ::tandem::ScaleInPlace(Raw(dst), factor);
}
absl::Status SimFillInPlace(const Tensor& dst, double value) {
  return ::tandem::FillInPlace(Raw(dst), value);
}
absl::Status SimConvert(const Tensor& src, const Tensor& dst) {
  if (src.device() != dst.device()) {
    return internal::DeviceMismatch("To(DType)", src.device(), dst.device());
  }
  internal::ConvertElements(src.raw_data(), src.dtype(), dst.raw_data(),
                            dst.dtype(), src.numel());
  return absl::OkStatus();
}

// The optimizer steps: the optimizer checked the state's device and dtype
// (CheckStepable); these run the CPU update on the host memory.
absl::Status SimSgdStep(const Tensor& param, const Tensor& grad,
                        const Tensor& buffer, const SgdStepArgs& args) {
  TANDEM_RETURN_IF_ERROR(
      internal::OpDevice("Sgd", param, grad, buffer).status());
  optim::SgdOptions o;
  o.momentum = args.momentum;
  o.dampening = args.dampening;
  o.weight_decay = args.weight_decay;
  o.nesterov = args.nesterov;
  o.maximize = args.maximize;
  if (param.dtype() == DType::kF64) {
    optim::internal::SgdUpdate<double>(
        param.data<double>(), grad.data<double>(), buffer.data<double>(),
        args.first, param.numel(), o, args.lr);
  } else {
    optim::internal::SgdUpdate<float>(param.data<float>(), grad.data<float>(),
                                      buffer.data<float>(), args.first,
                                      param.numel(), o, args.lr);
  }
  return absl::OkStatus();
}
absl::Status SimAdamWStep(const Tensor& param, const Tensor& grad,
                          const Tensor& exp_avg, const Tensor& exp_avg_sq,
                          const Tensor& max_exp_avg_sq,
                          const AdamWStepArgs& args) {
  TANDEM_RETURN_IF_ERROR(internal::OpDevice("AdamW", param, grad, exp_avg,
                                            exp_avg_sq, max_exp_avg_sq)
                             .status());
  optim::AdamWOptions o;
  o.beta1 = args.beta1;
  o.beta2 = args.beta2;
  o.eps = args.eps;
  o.amsgrad = args.amsgrad;
  o.maximize = args.maximize;
  optim::internal::AdamWScalars s;
  s.decay = args.decay;
  s.step_size = args.step_size;
  s.bias2_sqrt = args.bias2_sqrt;
  if (param.dtype() == DType::kF64) {
    optim::internal::AdamWUpdate<double>(
        param.data<double>(), grad.data<double>(), exp_avg.data<double>(),
        exp_avg_sq.data<double>(), max_exp_avg_sq.data<double>(), param.numel(),
        o, s);
  } else {
    optim::internal::AdamWUpdate<float>(
        param.data<float>(), grad.data<float>(), exp_avg.data<float>(),
        exp_avg_sq.data<float>(), max_exp_avg_sq.data<float>(), param.numel(),
        o, s);
  }
  return absl::OkStatus();
}

// ---- The one adapter: the same row's CPU kernel on host views of every
// tensor (outputs and gradient buffers included: the CPU kernel writes the
// simulated device's memory). Add a row with one line below.
Tensor OnHost(const Tensor& t) { return Raw(t); }
std::vector<Tensor> OnHost(absl::Span<const Tensor> ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(Raw(t));
  return out;
}
GradOut OnHost(const GradOut& out) {
  return GradOut{Raw(out.tensor), out.accumulate};
}
template <typename T>
T OnHost(T value) {
  return value;
}

template <auto Row, typename... Args>
absl::Status ViaCpu(Args... args) {
  auto cpu = Row().For(Device::CPU());
  if (!cpu.ok()) return cpu.status();
  return (*cpu)(OnHost(args)...);
}
// ---- End of the adapter.

}  // namespace

absl::Status RegisterSimKernels() {
  constexpr DeviceType kSim = DeviceType::kSim;
  for (absl::Status s : {
           AddInPlaceKernels().Register(kSim, SimAddInPlace),
           ScaleInPlaceKernels().Register(kSim, SimScaleInPlace),
           FillInPlaceKernels().Register(kSim, SimFillInPlace),
           ConvertKernels().Register(kSim, SimConvert),
           SgdStepKernels().Register(kSim, SimSgdStep),
           AdamWStepKernels().Register(kSim, SimAdamWStep),
           // Gelu.
           GeluKernels().Register(kSim, &ViaCpu<&GeluKernels>),
           GeluBackwardKernels().Register(kSim, &ViaCpu<&GeluBackwardKernels>),
           // BatchNorm (norm).
           BatchNormStatsKernels().Register(kSim,
                                            &ViaCpu<&BatchNormStatsKernels>),
           BatchNormGatherStatsKernels().Register(
               kSim, &ViaCpu<&BatchNormGatherStatsKernels>),
           BatchNormElemtKernels().Register(kSim,
                                            &ViaCpu<&BatchNormElemtKernels>),
           BatchNormBackwardReduceKernels().Register(
               kSim, &ViaCpu<&BatchNormBackwardReduceKernels>),
           BatchNormBackwardElemtKernels().Register(
               kSim, &ViaCpu<&BatchNormBackwardElemtKernels>),
           BatchNormInvstdKernels().Register(kSim,
                                             &ViaCpu<&BatchNormInvstdKernels>),
           // LayerNorm (norm).
           LayerNormKernels().Register(kSim, &ViaCpu<&LayerNormKernels>),
           LayerNormBackwardKernels().Register(
               kSim, &ViaCpu<&LayerNormBackwardKernels>),
           // Pooling (pool).
           Pool2dKernels().Register(kSim, &ViaCpu<&Pool2dKernels>),
           Pool2dBackwardKernels().Register(kSim,
                                            &ViaCpu<&Pool2dBackwardKernels>),
           // MatMul and Linear.
           MatMulKernels().Register(kSim, &ViaCpu<&MatMulKernels>),
           LinearKernels().Register(kSim, &ViaCpu<&LinearKernels>),
           ColumnSumsKernels().Register(kSim, &ViaCpu<&ColumnSumsKernels>),
           // Elementwise.
           BinaryKernels().Register(kSim, &ViaCpu<&BinaryKernels>),
           BinaryBackwardKernels().Register(kSim,
                                            &ViaCpu<&BinaryBackwardKernels>),
           UnaryKernels().Register(kSim, &ViaCpu<&UnaryKernels>),
           UnaryBackwardKernels().Register(kSim,
                                           &ViaCpu<&UnaryBackwardKernels>),
           // Reductions and Softmax.
           SoftmaxKernels().Register(kSim, &ViaCpu<&SoftmaxKernels>),
           SoftmaxBackwardKernels().Register(kSim,
                                             &ViaCpu<&SoftmaxBackwardKernels>),
           SumAllKernels().Register(kSim, &ViaCpu<&SumAllKernels>),
           SumAllBackwardKernels().Register(kSim,
                                            &ViaCpu<&SumAllBackwardKernels>),
           SumDimKernels().Register(kSim, &ViaCpu<&SumDimKernels>),
           SumDimBackwardKernels().Register(kSim,
                                            &ViaCpu<&SumDimBackwardKernels>),
           ArgmaxKernels().Register(kSim, &ViaCpu<&ArgmaxKernels>),
           // Conv2d.
           Conv2dKernels().Register(kSim, &ViaCpu<&Conv2dKernels>),
           Conv2dBackwardKernels().Register(kSim,
                                            &ViaCpu<&Conv2dBackwardKernels>),
           // Losses.
           CrossEntropyKernels().Register(kSim, &ViaCpu<&CrossEntropyKernels>),
           CrossEntropyBackwardKernels().Register(
               kSim, &ViaCpu<&CrossEntropyBackwardKernels>),
           MseKernels().Register(kSim, &ViaCpu<&MseKernels>),
           MseBackwardKernels().Register(kSim, &ViaCpu<&MseBackwardKernels>),
           // Permute (gpt).
           PermuteKernels().Register(kSim, &ViaCpu<&PermuteKernels>),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tandem::sim_internal
