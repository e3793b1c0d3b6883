// Elementwise ops: Add/Sub/Mul/Div with suffix/scalar broadcasting, the
// scalar forms, and unary functions (Neg, Relu, Sigmoid, Tanh, Exp, Log).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autocast_state.h"
#include "tensor/autograd/autograd.h"
#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/ops/bf16.h"
#include "tensor/ops/internal.h"

namespace tandem {
namespace {

using internal::Describe;
using internal::DispatchFloat;
// The broadcasting rules are shared with the device kernels (ops/internal.h).
using Operand = internal::BroadcastOperand;
using Plan = internal::BroadcastPlan;
using internal::MakeBroadcastPlan;

// out[o, i] = f(a[o, i], b[o, i]).
template <typename T, typename F>
void ForwardLoop(const Plan& p, const T* a, const T* b, T* out, F f) {
  for (int64_t o = 0; o < p.outer; ++o) {
    const T* pa = a + o * p.a.outer_stride;
    const T* pb = b + o * p.b.outer_stride;
    T* po = out + o * p.inner;
    const int64_t sa = p.a.inner_stride, sb = p.b.inner_stride;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < p.inner; ++i) po[i] = f(pa[i], pb[i]);
    } else if (sa == 1) {
      const T vb = pb[0];
      for (int64_t i = 0; i < p.inner; ++i) po[i] = f(pa[i], vb);
    } else {
      const T va = pa[0];
      for (int64_t i = 0; i < p.inner; ++i) po[i] = f(va, pb[i]);
    }
  }
}

// Writes operand X's gradient, d(a op b)/dX * g, into `buf`. A broadcast
// operand's contributions are summed over the positions it was repeated at.
template <typename T, typename D>
void BackwardLoop(const Plan& p, const Operand& x, const T* a, const T* b,
                  const T* g, T* buf, int64_t buf_numel, bool accumulate, D d) {
  auto at = [&](int64_t o, int64_t i) {
    return d(a[o * p.a.outer_stride + i * p.a.inner_stride],
             b[o * p.b.outer_stride + i * p.b.inner_stride],
             g[o * p.inner + i]);
  };
  if (!x.broadcast) {
    for (int64_t o = 0; o < p.outer; ++o) {
      T* pb = buf + o * p.inner;
      if (accumulate) {
        for (int64_t i = 0; i < p.inner; ++i) pb[i] += at(o, i);
      } else {
        for (int64_t i = 0; i < p.inner; ++i) pb[i] = at(o, i);
      }
    }
    return;
  }
  if (x.inner_stride == 0) {  // one element: sum everything, in double
    double acc = 0;
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t i = 0; i < p.inner; ++i) acc += at(o, i);
    }
    buf[0] = static_cast<T>((accumulate ? buf[0] : T(0)) + acc);
    return;
  }
  if (!accumulate) std::fill(buf, buf + buf_numel, T(0));
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) buf[i] += at(o, i);
  }
}

AmpOp ToAmpOp(BinaryOp k) {
  switch (k) {
    case BinaryOp::kAdd:
      return AmpOp::kAdd;
    case BinaryOp::kSub:
      return AmpOp::kSub;
    case BinaryOp::kMul:
      return AmpOp::kMul;
    case BinaryOp::kDiv:
      return AmpOp::kDiv;
  }
  return AmpOp::kAdd;
}

// Operand `i`'s gradient of `a kind b` (a and b are undefined where the
// formula does not read them).
template <typename T>
void BinaryBackward(BinaryOp kind, int i, const Plan& p, const Tensor& a,
                    const Tensor& b, const Tensor& g, const GradOut& buf) {
  const T* pa = a.defined() ? a.data<T>() : nullptr;
  const T* pb = b.defined() ? b.data<T>() : nullptr;
  const T* pg = g.data<T>();
  const Operand& x = i == 0 ? p.a : p.b;
  T* out = buf.tensor.data<T>();
  const int64_t n = buf.tensor.numel();
  const bool acc = buf.accumulate;
  // Operands a closure ignores point at g, which is indexable everywhere.
  switch (kind) {
    case BinaryOp::kAdd:
      BackwardLoop<T>(p, x, pg, pg, pg, out, n, acc,
                      [](T, T, T gv) { return gv; });
      break;
    case BinaryOp::kSub:
      if (i == 0) {
        BackwardLoop<T>(p, x, pg, pg, pg, out, n, acc,
                        [](T, T, T gv) { return gv; });
      } else {
        BackwardLoop<T>(p, x, pg, pg, pg, out, n, acc,
                        [](T, T, T gv) { return -gv; });
      }
      break;
    case BinaryOp::kMul:
      if (i == 0) {
        BackwardLoop<T>(p, x, pg, pb, pg, out, n, acc,
                        [](T, T bv, T gv) { return gv * bv; });
      } else {
        BackwardLoop<T>(p, x, pa, pg, pg, out, n, acc,
                        [](T av, T, T gv) { return gv * av; });
      }
      break;
    case BinaryOp::kDiv:
      if (i == 0) {
        BackwardLoop<T>(p, x, pg, pb, pg, out, n, acc,
                        [](T, T bv, T gv) { return gv / bv; });
      } else {
        BackwardLoop<T>(p, x, pa, pb, pg, out, n, acc,
                        [](T av, T bv, T gv) { return -gv * av / (bv * bv); });
      }
      break;
  }
}

// The CPU kernels of Add/Sub/Mul/Div (checked by Binary below).
absl::Status CpuBinary(BinaryOp kind, const Tensor& a, const Tensor& b,
                       const Plan& plan, const Tensor& out) {
  DispatchFloat(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    switch (kind) {
      case BinaryOp::kAdd:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x + y; });
      case BinaryOp::kSub:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x - y; });
      case BinaryOp::kMul:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x * y; });
      case BinaryOp::kDiv:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x / y; });
    }
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BinaryKernels(), DeviceType::kCPU, CpuBinary);

absl::Status CpuBinaryBackward(BinaryOp kind, int input, const Tensor& a,
                               const Tensor& b, const Tensor& g,
                               const Plan& plan, const GradOut& out) {
  DispatchFloat(g.dtype(), [&](auto zero) {
    using T = decltype(zero);
    BinaryBackward<T>(kind, input, plan, a, b, g, out);
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(BinaryBackwardKernels(), DeviceType::kCPU,
                       CpuBinaryBackward);

// Add/Sub/Mul/Div on every device: the one argument check, then the
// kernel of the operands' device.
absl::StatusOr<Tensor> Binary(BinaryOp kind, const Tensor& a, const Tensor& b) {
  if (auto routed = internal::RouteLowPrecision(
          ToAmpOp(kind), {a, b}, [&](const std::vector<Tensor>& in) {
            return Binary(kind, in[0], in[1]);
          })) {
    return *std::move(routed);
  }
  const char* name = BinaryOpName(kind);
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice(name, a, b));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(a, name, "a"));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(b, name, "b"));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(a, b, name));
  TANDEM_ASSIGN_OR_RETURN(const Plan plan, MakeBroadcastPlan(a, b, name));
  TANDEM_ASSIGN_OR_RETURN(BinaryKernel * kernel, BinaryKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor out,
                          Tensor::Empty(plan.out_shape, a.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(kind, a, b, plan, out));
  if (ShouldRecord({a, b})) {
    // The one backward formula. Only Mul and Div read the operands.
    const bool saves = kind == BinaryOp::kMul || kind == BinaryOp::kDiv;
    RecordOp(
        name, out, {a, b},
        [kind, plan, device, sa = saves ? a.Detach() : Tensor(),
         sb = saves ? b.Detach() : Tensor()](const Tensor& g,
                                             GradSink& sink) -> absl::Status {
          const char* name = BinaryOpName(kind);
          TANDEM_RETURN_IF_ERROR(internal::CheckGradDevice(g, device, name));
          for (int i = 0; i < 2; ++i) {
            if (!sink.needs(i)) continue;
            const Operand& x = i == 0 ? plan.a : plan.b;
            // Pass-through gradients of equal-shape operands are handed
            // over without a copy.
            if (!x.broadcast && ((i == 0 && (kind == BinaryOp::kAdd ||
                                             kind == BinaryOp::kSub)) ||
                                 (i == 1 && kind == BinaryOp::kAdd))) {
              TANDEM_RETURN_IF_ERROR(sink.Add(i, g));
              continue;
            }
            TANDEM_ASSIGN_OR_RETURN(BinaryBackwardKernel * backward,
                                    BinaryBackwardKernels().For(device));
            TANDEM_ASSIGN_OR_RETURN(GradOut buf, sink.GetBuffer(i));
            TANDEM_RETURN_IF_ERROR(backward(kind, i, sa, sb, g, plan, buf));
          }
          return absl::OkStatus();
        });
  }
  return out;
}

// Calls v(f, df) with op's function y = f(x) and its derivative
// gx = df(x, y, g), each generic over the element type.
template <typename V>
void VisitUnary(UnaryOp op, double s, V&& v) {
  switch (op) {
    case UnaryOp::kAddScalar:
      return v([s](auto x) { return x + static_cast<decltype(x)>(s); },
               [](auto, auto, auto g) { return g; });
    case UnaryOp::kSubScalar:
      return v([s](auto x) { return x - static_cast<decltype(x)>(s); },
               [](auto, auto, auto g) { return g; });
    case UnaryOp::kMulScalar:
      return v(
          [s](auto x) { return x * static_cast<decltype(x)>(s); },
          [s](auto, auto, auto g) { return g * static_cast<decltype(g)>(s); });
    case UnaryOp::kDivScalar:
      return v(
          [s](auto x) { return x / static_cast<decltype(x)>(s); },
          [s](auto, auto, auto g) { return g / static_cast<decltype(g)>(s); });
    case UnaryOp::kNeg:
      return v([](auto x) { return -x; },
               [](auto, auto, auto g) { return -g; });
    case UnaryOp::kRelu:
      // NaN stays NaN (x < 0 is false), as torch.relu.
      return v(
          [](auto x) { return x < 0 ? decltype(x)(0) : x; },
          [](auto xv, auto, auto g) { return xv > 0 ? g : decltype(g)(0); });
    case UnaryOp::kSigmoid:
      return v(
          [](auto x) {
            using T = decltype(x);
            // Never exponentiates a large positive number.
            if (x >= 0) return T(1) / (T(1) + std::exp(-x));
            const T e = std::exp(x);
            return e / (T(1) + e);
          },
          [](auto, auto yv, auto g) { return g * yv * (decltype(g)(1) - yv); });
    case UnaryOp::kTanh:
      return v(
          [](auto x) { return std::tanh(x); },
          [](auto, auto yv, auto g) { return g * (decltype(g)(1) - yv * yv); });
    case UnaryOp::kExp:
      return v([](auto x) { return std::exp(x); },
               [](auto, auto yv, auto g) { return g * yv; });
    case UnaryOp::kLog:
      return v([](auto x) { return std::log(x); },
               [](auto xv, auto, auto g) { return g / xv; });
  }
}

// What op's derivative reads: x (Relu, Log) or y (Sigmoid, Tanh, Exp).
bool UnaryBackwardReadsX(UnaryOp op) {
  return op == UnaryOp::kRelu || op == UnaryOp::kLog;
}
bool UnaryBackwardReadsY(UnaryOp op) {
  return op == UnaryOp::kSigmoid || op == UnaryOp::kTanh || op == UnaryOp::kExp;
}

// The CPU kernels of the elementwise functions (checked by Unary below).
absl::Status CpuUnary(UnaryOp op, const Tensor& x, double s, const Tensor& y) {
  VisitUnary(op, s, [&](auto f, auto) {
    DispatchFloat(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();
      T* py = y.data<T>();
      const int64_t n = x.numel();  // hoisted: lets the loop vectorise
      for (int64_t i = 0; i < n; ++i) py[i] = f(px[i]);
    });
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(UnaryKernels(), DeviceType::kCPU, CpuUnary);

absl::Status CpuUnaryBackward(UnaryOp op, double s, const Tensor& x,
                              const Tensor& y, const Tensor& g,
                              const GradOut& buf) {
  VisitUnary(op, s, [&](auto, auto df) {
    DispatchFloat(g.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.defined() ? x.data<T>() : nullptr;
      const T* py = y.defined() ? y.data<T>() : nullptr;
      const T* pg = g.data<T>();
      T* out = buf.tensor.data<T>();
      const int64_t n = g.numel();
      for (int64_t i = 0; i < n; ++i) {
        const T d = df(px ? px[i] : T(0), py ? py[i] : T(0), pg[i]);
        out[i] = buf.accumulate ? out[i] + d : d;
      }
    });
  });
  return absl::OkStatus();
}
TANDEM_REGISTER_KERNEL(UnaryBackwardKernels(), DeviceType::kCPU,
                       CpuUnaryBackward);

// The elementwise functions on every device: the one argument check, then
// the kernel of x's device.
absl::StatusOr<Tensor> Unary(UnaryOp op, const Tensor& x, double scalar) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kUnary, {x}, [&](const std::vector<Tensor>& in) {
            return Unary(op, in[0], scalar);
          })) {
    return *std::move(routed);
  }
  const char* name = UnaryOpName(op);
  TANDEM_ASSIGN_OR_RETURN(const Device device, internal::OpDevice(name, x));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, name, "x"));
  TANDEM_ASSIGN_OR_RETURN(UnaryKernel * kernel, UnaryKernels().For(device));
  TANDEM_ASSIGN_OR_RETURN(Tensor y,
                          Tensor::Empty(x.shape(), x.dtype(), device));
  TANDEM_RETURN_IF_ERROR(kernel(op, x, scalar, y));
  if (ShouldRecord({x})) {
    // The one backward formula: UnaryBackward on what the derivative reads.
    RecordOp(name, y, {x},
             [op, scalar, device,
              sx = UnaryBackwardReadsX(op) ? x.Detach() : Tensor(),
              sy = UnaryBackwardReadsY(op) ? y.Detach() : Tensor()](
                 const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_RETURN_IF_ERROR(
                   internal::CheckGradDevice(g, device, UnaryOpName(op)));
               TANDEM_ASSIGN_OR_RETURN(UnaryBackwardKernel * backward,
                                       UnaryBackwardKernels().For(device));
               TANDEM_ASSIGN_OR_RETURN(GradOut buf, sink.GetBuffer(0));
               return backward(op, scalar, sx, sy, g, buf);
             });
  }
  return y;
}

}  // namespace

absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b) {
  return Binary(BinaryOp::kAdd, a, b);
}
absl::StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b) {
  return Binary(BinaryOp::kSub, a, b);
}
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b) {
  return Binary(BinaryOp::kMul, a, b);
}
absl::StatusOr<Tensor> Div(const Tensor& a, const Tensor& b) {
  return Binary(BinaryOp::kDiv, a, b);
}

absl::StatusOr<Tensor> Add(const Tensor& a, double s) {
  return Unary(UnaryOp::kAddScalar, a, s);
}
absl::StatusOr<Tensor> Sub(const Tensor& a, double s) {
  return Unary(UnaryOp::kSubScalar, a, s);
}
absl::StatusOr<Tensor> Mul(const Tensor& a, double s) {
  return Unary(UnaryOp::kMulScalar, a, s);
}
absl::StatusOr<Tensor> Div(const Tensor& a, double s) {
  return Unary(UnaryOp::kDivScalar, a, s);
}
absl::StatusOr<Tensor> Neg(const Tensor& x) {
  return Unary(UnaryOp::kNeg, x, 0);
}

absl::StatusOr<Tensor> Relu(const Tensor& x) {
  // f16/bf16 on the CPU: a 16-bit kernel (ops/bf16.h), so what backward
  // keeps is 16-bit. Autocast would not cast a lone 16-bit input here
  // (single-input ops keep their dtype), so skipping the routing changes
  // nothing but the memory.
  if (x.defined() && x.device().type() == DeviceType::kCPU &&
      (x.dtype() == DType::kBF16 || x.dtype() == DType::kF16)) {
    return internal::ReluLowPrecision(x);
  }
  return Unary(UnaryOp::kRelu, x, 0);
}

absl::StatusOr<Tensor> Sigmoid(const Tensor& x) {
  return Unary(UnaryOp::kSigmoid, x, 0);
}
absl::StatusOr<Tensor> Tanh(const Tensor& x) {
  return Unary(UnaryOp::kTanh, x, 0);
}
absl::StatusOr<Tensor> Exp(const Tensor& x) {
  return Unary(UnaryOp::kExp, x, 0);
}
absl::StatusOr<Tensor> Log(const Tensor& x) {
  return Unary(UnaryOp::kLog, x, 0);
}

const char* BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "Add";
    case BinaryOp::kSub:
      return "Sub";
    case BinaryOp::kMul:
      return "Mul";
    case BinaryOp::kDiv:
      return "Div";
  }
  return "?";
}

const char* UnaryOpName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
      return "Neg";
    case UnaryOp::kRelu:
      return "Relu";
    case UnaryOp::kSigmoid:
      return "Sigmoid";
    case UnaryOp::kTanh:
      return "Tanh";
    case UnaryOp::kExp:
      return "Exp";
    case UnaryOp::kLog:
      return "Log";
    case UnaryOp::kAddScalar:
      return "AddScalar";
    case UnaryOp::kSubScalar:
      return "SubScalar";
    case UnaryOp::kMulScalar:
      return "MulScalar";
    case UnaryOp::kDivScalar:
      return "DivScalar";
  }
  return "?";
}

}  // namespace tandem
