// The kernels of simulated devices: every op checks that its tensors sit on
// one simulated device, runs the CPU op on host views of them, and labels
// the result with the device. Autograd sees two extra nodes per crossing
// ("SimToHost", "HostToSim") whose backward relabels the gradient the other
// way, so gradients of simulated tensors are simulated tensors and every
// value is bit for bit the CPU's.
#include <initializer_list>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd.h"
#include "tensor/convert.h"
#include "tensor/device_ops.h"
#include "tensor/ops.h"
#include "tensor/optim/update_kernels.h"
#include "tensor/sim/sim_internal.h"
#include "tensor/tensor.h"

namespace tandem::sim_internal {
namespace {

// The one device of `tensors` (undefined ones skipped): PyTorch's
// "Expected all tensors to be on the same device" when two differ.
absl::StatusOr<Device> SameDevice(const char* op,
                                  std::initializer_list<Tensor> tensors) {
  bool found = false;
  Device device;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!found) {
      device = t.device();
      found = true;
    } else if (t.device() != device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected all tensors to be on the same device, but found at least "
          "two devices, ",
          device.ToString(), " and ", t.device().ToString(), " (in ", op,
          "); move one with To(Device) first"));
    }
  }
  if (!found || !device.is_sim()) {
    return absl::InternalError(absl::StrCat(
        op,
        " reached the simulated-device kernels without a simulated "
        "tensor; this is a bug in the device dispatch"));
  }
  return device;
}

// A differentiable relabel: `t`'s elements labelled `to`; the backward
// relabels the gradient back to t's device. Undefined stays undefined.
Tensor Move(const Tensor& t, Device to) {
  if (!t.defined()) return t;
  Tensor out = Relabel(t, to);
  if (ShouldRecord({t})) {
    const Device from = t.device();
    RecordOp(to.is_cpu() ? "SimToHost" : "HostToSim", out, {t},
             [from](const Tensor& g, GradSink& sink) -> absl::Status {
               return sink.Add(0, Relabel(g, from));
             });
  }
  return out;
}

Tensor Host(const Tensor& t) { return Move(t, Device::CPU()); }

// Relabels a host result back onto `device`.
absl::StatusOr<Tensor> Back(absl::StatusOr<Tensor> result, Device device) {
  if (!result.ok()) return result.status();
  return Move(*result, device);
}

// A non-recording host view (in-place ops, optimizer steps).
Tensor Raw(const Tensor& t) {
  return t.defined() ? Relabel(t, Device::CPU()) : t;
}

class SimDeviceOps : public DeviceOps {
 public:
  absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b,
                                bool transpose_a, bool transpose_b) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("MatMul", {a, b}));
    return Back(::tandem::MatMul(Host(a), Host(b), transpose_a, transpose_b),
                d);
  }
  absl::StatusOr<Tensor> Linear(const Tensor& x, const Tensor& weight,
                                const Tensor& bias) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Linear", {x, weight, bias}));
    return Back(::tandem::Linear(Host(x), Host(weight), Host(bias)), d);
  }
  absl::StatusOr<Tensor> Binary(BinaryOp op, const Tensor& a,
                                const Tensor& b) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("a binary op", {a, b}));
    const Tensor ha = Host(a);
    const Tensor hb = Host(b);
    switch (op) {
      case BinaryOp::kAdd:
        return Back(::tandem::Add(ha, hb), d);
      case BinaryOp::kSub:
        return Back(::tandem::Sub(ha, hb), d);
      case BinaryOp::kMul:
        return Back(::tandem::Mul(ha, hb), d);
      case BinaryOp::kDiv:
        return Back(::tandem::Div(ha, hb), d);
    }
    return absl::InternalError("unknown BinaryOp");
  }
  absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x,
                               double scalar) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("an elementwise op", {x}));
    const Tensor h = Host(x);
    switch (op) {
      case UnaryOp::kNeg:
        return Back(::tandem::Neg(h), d);
      case UnaryOp::kRelu:
        return Back(::tandem::Relu(h), d);
      case UnaryOp::kSigmoid:
        return Back(::tandem::Sigmoid(h), d);
      case UnaryOp::kTanh:
        return Back(::tandem::Tanh(h), d);
      case UnaryOp::kExp:
        return Back(::tandem::Exp(h), d);
      case UnaryOp::kLog:
        return Back(::tandem::Log(h), d);
      case UnaryOp::kAddScalar:
        return Back(::tandem::Add(h, scalar), d);
      case UnaryOp::kSubScalar:
        return Back(::tandem::Sub(h, scalar), d);
      case UnaryOp::kMulScalar:
        return Back(::tandem::Mul(h, scalar), d);
      case UnaryOp::kDivScalar:
        return Back(::tandem::Div(h, scalar), d);
    }
    return absl::InternalError("unknown UnaryOp");
  }
  absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim,
                                 bool log) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Softmax", {x}));
    return Back(log ? ::tandem::LogSoftmax(Host(x), dim)
                    : ::tandem::Softmax(Host(x), dim),
                d);
  }
  absl::StatusOr<Tensor> SumAll(const Tensor& x, bool mean) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Sum", {x}));
    return Back(mean ? ::tandem::Mean(Host(x)) : ::tandem::Sum(Host(x)), d);
  }
  absl::StatusOr<Tensor> SumDim(const Tensor& x, int64_t dim, bool keepdim,
                                bool mean) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Sum", {x}));
    return Back(mean ? ::tandem::Mean(Host(x), dim, keepdim)
                     : ::tandem::Sum(Host(x), dim, keepdim),
                d);
  }
  absl::StatusOr<Tensor> Argmax(const Tensor& x, int64_t dim) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Argmax", {x}));
    return Back(::tandem::Argmax(Host(x), dim), d);
  }
  absl::StatusOr<Tensor> Conv2d(const Tensor& x, const Tensor& weight,
                                const Tensor& bias,
                                const Conv2dOptions& options) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Conv2d", {x, weight, bias}));
    return Back(::tandem::Conv2d(Host(x), Host(weight), Host(bias), options),
                d);
  }
  absl::StatusOr<Tensor> MaxPool2d(const Tensor& x,
                                   const MaxPool2dOptions& options) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("MaxPool2d", {x}));
    return Back(::tandem::MaxPool2d(Host(x), options), d);
  }
  absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits,
                                      const Tensor& labels) override {
    TANDEM_ASSIGN_OR_RETURN(Device d,
                            SameDevice("CrossEntropy", {logits, labels}));
    return Back(::tandem::CrossEntropy(Host(logits), Host(labels)), d);
  }
  absl::StatusOr<Tensor> Mse(const Tensor& prediction,
                             const Tensor& target) override {
    TANDEM_ASSIGN_OR_RETURN(Device d, SameDevice("Mse", {prediction, target}));
    return Back(::tandem::Mse(Host(prediction), Host(target)), d);
  }

  absl::Status AddInPlace(const Tensor& dst, const Tensor& src,
                          double alpha) override {
    TANDEM_RETURN_IF_ERROR(SameDevice("AddInPlace", {dst, src}).status());
    return ::tandem::AddInPlace(Raw(dst), Raw(src), alpha);
  }
  absl::Status ScaleInPlace(const Tensor& dst, double factor) override {
    TANDEM_RETURN_IF_ERROR(SameDevice("ScaleInPlace", {dst}).status());
    return ::tandem::ScaleInPlace(Raw(dst), factor);
  }
  absl::Status FillInPlace(const Tensor& dst, double value) override {
    TANDEM_RETURN_IF_ERROR(SameDevice("FillInPlace", {dst}).status());
    return ::tandem::FillInPlace(Raw(dst), value);
  }
  absl::Status Convert(const Tensor& src, const Tensor& dst) override {
    TANDEM_RETURN_IF_ERROR(SameDevice("To(DType)", {src, dst}).status());
    internal::ConvertElements(src.raw_data(), src.dtype(), dst.raw_data(),
                              dst.dtype(), src.numel());
    return absl::OkStatus();
  }

  absl::Status SgdStep(const Tensor& param, const Tensor& grad,
                       const Tensor& buffer, const SgdStepArgs& args) override {
    TANDEM_RETURN_IF_ERROR(SameDevice("Sgd", {param, grad, buffer}).status());
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
  absl::Status AdamWStep(const Tensor& param, const Tensor& grad,
                         const Tensor& exp_avg, const Tensor& exp_avg_sq,
                         const Tensor& max_exp_avg_sq,
                         const AdamWStepArgs& args) override {
    TANDEM_RETURN_IF_ERROR(
        SameDevice("AdamW", {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq})
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
          exp_avg_sq.data<double>(), max_exp_avg_sq.data<double>(),
          param.numel(), o, s);
    } else {
      optim::internal::AdamWUpdate<float>(
          param.data<float>(), grad.data<float>(), exp_avg.data<float>(),
          exp_avg_sq.data<float>(), max_exp_avg_sq.data<float>(), param.numel(),
          o, s);
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::shared_ptr<DeviceOps> MakeSimDeviceOps() {
  return std::make_shared<SimDeviceOps>();
}

}  // namespace tandem::sim_internal
