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
#include "tensor/autograd.h"
#include "tensor/device_ops.h"
#include "tensor/ops.h"
#include "tensor/ops_bf16.h"
#include "tensor/ops_internal.h"

namespace tandem {
namespace {

using internal::Describe;
using internal::DispatchFloat;
using internal::NewLike;
// The broadcasting rules are shared with the device kernels (ops_internal.h).
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

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

AmpOp ToAmpOp(BinaryKind k) {
  switch (k) {
    case BinaryKind::kAdd:
      return AmpOp::kAdd;
    case BinaryKind::kSub:
      return AmpOp::kSub;
    case BinaryKind::kMul:
      return AmpOp::kMul;
    case BinaryKind::kDiv:
      return AmpOp::kDiv;
  }
  return AmpOp::kAdd;
}

const char* BinaryName(BinaryKind k) {
  switch (k) {
    case BinaryKind::kAdd:
      return "Add";
    case BinaryKind::kSub:
      return "Sub";
    case BinaryKind::kMul:
      return "Mul";
    case BinaryKind::kDiv:
      return "Div";
  }
  return "?";
}

template <typename T>
absl::Status BinaryBackward(BinaryKind kind, const Plan& p, const Tensor& a,
                            const Tensor& b, const Tensor& g, GradSink& sink) {
  const T* pa = a.defined() ? a.data<T>() : nullptr;
  const T* pb = b.defined() ? b.data<T>() : nullptr;
  const T* pg = g.data<T>();
  for (int i = 0; i < 2; ++i) {
    if (!sink.needs(i)) continue;
    const Operand& x = i == 0 ? p.a : p.b;
    // Pass-through gradients of equal-shape operands are handed over
    // without a copy.
    if (!x.broadcast && i == 0 &&
        (kind == BinaryKind::kAdd || kind == BinaryKind::kSub)) {
      TANDEM_RETURN_IF_ERROR(sink.Add(0, g));
      continue;
    }
    if (!x.broadcast && i == 1 && kind == BinaryKind::kAdd) {
      TANDEM_RETURN_IF_ERROR(sink.Add(1, g));
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(i));
    T* out = buf.tensor.data<T>();
    const int64_t n = buf.tensor.numel();
    const bool acc = buf.accumulate;
    // Operands a closure ignores point at g, which is indexable everywhere.
    switch (kind) {
      case BinaryKind::kAdd:
        BackwardLoop<T>(p, x, pg, pg, pg, out, n, acc,
                        [](T, T, T gv) { return gv; });
        break;
      case BinaryKind::kSub:
        if (i == 0) {
          BackwardLoop<T>(p, x, pg, pg, pg, out, n, acc,
                          [](T, T, T gv) { return gv; });
        } else {
          BackwardLoop<T>(p, x, pg, pg, pg, out, n, acc,
                          [](T, T, T gv) { return -gv; });
        }
        break;
      case BinaryKind::kMul:
        if (i == 0) {
          BackwardLoop<T>(p, x, pg, pb, pg, out, n, acc,
                          [](T, T bv, T gv) { return gv * bv; });
        } else {
          BackwardLoop<T>(p, x, pa, pg, pg, out, n, acc,
                          [](T av, T, T gv) { return gv * av; });
        }
        break;
      case BinaryKind::kDiv:
        if (i == 0) {
          BackwardLoop<T>(p, x, pg, pb, pg, out, n, acc,
                          [](T, T bv, T gv) { return gv / bv; });
        } else {
          BackwardLoop<T>(p, x, pa, pb, pg, out, n, acc, [](T av, T bv, T gv) {
            return -gv * av / (bv * bv);
          });
        }
        break;
    }
  }
  return absl::OkStatus();
}

BinaryOp ToBinaryOp(BinaryKind k) {
  switch (k) {
    case BinaryKind::kAdd:
      return BinaryOp::kAdd;
    case BinaryKind::kSub:
      return BinaryOp::kSub;
    case BinaryKind::kMul:
      return BinaryOp::kMul;
    case BinaryKind::kDiv:
      return BinaryOp::kDiv;
  }
  return BinaryOp::kAdd;
}

absl::StatusOr<Tensor> Binary(BinaryKind kind, const Tensor& a,
                              const Tensor& b) {
  if (auto routed = internal::RouteLowPrecision(
          ToAmpOp(kind), {a, b}, [&](const std::vector<Tensor>& in) {
            return Binary(kind, in[0], in[1]);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(DeviceOps * dev, internal::DeviceOpsFor({a, b}));
  if (dev != nullptr) return dev->Binary(ToBinaryOp(kind), a, b);
  const char* name = BinaryName(kind);
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(a, name, "a"));
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(b, name, "b"));
  TANDEM_RETURN_IF_ERROR(internal::CheckSameDType(a, b, name));
  TANDEM_ASSIGN_OR_RETURN(Plan plan, MakeBroadcastPlan(a, b, name));
  TANDEM_ASSIGN_OR_RETURN(Tensor out, NewLike(plan.out_shape, a.dtype()));
  DispatchFloat(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    switch (kind) {
      case BinaryKind::kAdd:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x + y; });
      case BinaryKind::kSub:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x - y; });
      case BinaryKind::kMul:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x * y; });
      case BinaryKind::kDiv:
        return ForwardLoop<T>(plan, pa, pb, po, [](T x, T y) { return x / y; });
    }
  });
  if (ShouldRecord({a, b})) {
    // Only Mul and Div read the operands in backward.
    const bool saves = kind == BinaryKind::kMul || kind == BinaryKind::kDiv;
    Tensor sa = saves ? a.Detach() : Tensor();
    Tensor sb = saves ? b.Detach() : Tensor();
    RecordOp(name, out, {a, b},
             [kind, plan, sa, sb](const Tensor& g, GradSink& sink) {
               return DispatchFloat(g.dtype(), [&](auto zero) {
                 using T = decltype(zero);
                 return BinaryBackward<T>(kind, plan, sa, sb, g, sink);
               });
             });
  }
  return out;
}

// y = f(x) elementwise; gx = df(x, y) * g.
// `op` and `scalar` name the same function for the device kernels.
template <typename F, typename DF>
absl::StatusOr<Tensor> Unary(const char* name, UnaryOp op, double scalar,
                             const Tensor& x, F f, DF df, bool needs_x,
                             bool needs_y) {
  if (auto routed = internal::RouteLowPrecision(
          AmpOp::kUnary, {x}, [&](const std::vector<Tensor>& in) {
            return Unary(name, op, scalar, in[0], f, df, needs_x, needs_y);
          })) {
    return *std::move(routed);
  }
  TANDEM_ASSIGN_OR_RETURN(DeviceOps * dev, internal::DeviceOpsFor({x}));
  if (dev != nullptr) return dev->Unary(op, x, scalar);
  TANDEM_RETURN_IF_ERROR(internal::CheckFloat(x, name, "x"));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, NewLike(x.shape(), x.dtype()));
  DispatchFloat(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const int64_t n = x.numel();  // hoisted: lets the loop vectorise
    for (int64_t i = 0; i < n; ++i) py[i] = f(px[i]);
  });
  if (ShouldRecord({x})) {
    Tensor sx = needs_x ? x.Detach() : Tensor();
    Tensor sy = needs_y ? y.Detach() : Tensor();
    RecordOp(name, y, {x},
             [sx, sy, df](const Tensor& g, GradSink& sink) -> absl::Status {
               TANDEM_ASSIGN_OR_RETURN(GradSink::Buffer buf, sink.GetBuffer(0));
               DispatchFloat(g.dtype(), [&](auto zero) {
                 using T = decltype(zero);
                 const T* px = sx.defined() ? sx.data<T>() : nullptr;
                 const T* py = sy.defined() ? sy.data<T>() : nullptr;
                 const T* pg = g.data<T>();
                 T* out = buf.tensor.data<T>();
                 const int64_t n = g.numel();
                 for (int64_t i = 0; i < n; ++i) {
                   const T d = df(px ? px[i] : T(0), py ? py[i] : T(0), pg[i]);
                   out[i] = buf.accumulate ? out[i] + d : d;
                 }
               });
               return absl::OkStatus();
             });
  }
  return y;
}

}  // namespace

absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b) {
  return Binary(BinaryKind::kAdd, a, b);
}
absl::StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b) {
  return Binary(BinaryKind::kSub, a, b);
}
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b) {
  return Binary(BinaryKind::kMul, a, b);
}
absl::StatusOr<Tensor> Div(const Tensor& a, const Tensor& b) {
  return Binary(BinaryKind::kDiv, a, b);
}

absl::StatusOr<Tensor> Add(const Tensor& a, double s) {
  return Unary(
      "AddScalar", UnaryOp::kAddScalar, s, a,
      [s](auto x) { return x + static_cast<decltype(x)>(s); },
      [](auto, auto, auto g) { return g; }, false, false);
}
absl::StatusOr<Tensor> Sub(const Tensor& a, double s) {
  return Unary(
      "SubScalar", UnaryOp::kSubScalar, s, a,
      [s](auto x) { return x - static_cast<decltype(x)>(s); },
      [](auto, auto, auto g) { return g; }, false, false);
}
absl::StatusOr<Tensor> Mul(const Tensor& a, double s) {
  return Unary(
      "MulScalar", UnaryOp::kMulScalar, s, a,
      [s](auto x) { return x * static_cast<decltype(x)>(s); },
      [s](auto, auto, auto g) { return g * static_cast<decltype(g)>(s); },
      false, false);
}
absl::StatusOr<Tensor> Div(const Tensor& a, double s) {
  return Unary(
      "DivScalar", UnaryOp::kDivScalar, s, a,
      [s](auto x) { return x / static_cast<decltype(x)>(s); },
      [s](auto, auto, auto g) { return g / static_cast<decltype(g)>(s); },
      false, false);
}
absl::StatusOr<Tensor> Neg(const Tensor& x) {
  return Unary(
      "Neg", UnaryOp::kNeg, 0, x, [](auto v) { return -v; },
      [](auto, auto, auto g) { return -g; }, false, false);
}

absl::StatusOr<Tensor> Relu(const Tensor& x) {
  // f16/bf16 on the CPU: a 16-bit kernel (ops_bf16.h), so what backward
  // keeps is 16-bit. Autocast would not cast a lone 16-bit input here
  // (single-input ops keep their dtype), so skipping the routing changes
  // nothing but the memory.
  if (x.defined() && x.device().type() == DeviceType::kCPU &&
      (x.dtype() == DType::kBF16 || x.dtype() == DType::kF16)) {
    return internal::ReluLowPrecision(x);
  }
  // NaN stays NaN (v < 0 is false), as torch.relu.
  return Unary(
      "Relu", UnaryOp::kRelu, 0, x,
      [](auto v) { return v < 0 ? decltype(v)(0) : v; },
      [](auto xv, auto, auto g) { return xv > 0 ? g : decltype(g)(0); }, true,
      false);
}

absl::StatusOr<Tensor> Sigmoid(const Tensor& x) {
  return Unary(
      "Sigmoid", UnaryOp::kSigmoid, 0, x,
      [](auto v) {
        using T = decltype(v);
        // Never exponentiates a large positive number.
        if (v >= 0) return T(1) / (T(1) + std::exp(-v));
        const T e = std::exp(v);
        return e / (T(1) + e);
      },
      [](auto, auto yv, auto g) { return g * yv * (decltype(g)(1) - yv); },
      false, true);
}

absl::StatusOr<Tensor> Tanh(const Tensor& x) {
  return Unary(
      "Tanh", UnaryOp::kTanh, 0, x, [](auto v) { return std::tanh(v); },
      [](auto, auto yv, auto g) { return g * (decltype(g)(1) - yv * yv); },
      false, true);
}

absl::StatusOr<Tensor> Exp(const Tensor& x) {
  return Unary(
      "Exp", UnaryOp::kExp, 0, x, [](auto v) { return std::exp(v); },
      [](auto, auto yv, auto g) { return g * yv; }, false, true);
}

absl::StatusOr<Tensor> Log(const Tensor& x) {
  return Unary(
      "Log", UnaryOp::kLog, 0, x, [](auto v) { return std::log(v); },
      [](auto xv, auto, auto g) { return g / xv; }, true, false);
}

}  // namespace tandem
