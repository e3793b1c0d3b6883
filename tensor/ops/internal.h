// Internal helpers shared by the op definitions in tensor/ops/: argument checks
// with uniform messages, float dispatch, and dim arithmetic.
#ifndef TANDEM_TENSOR_OPS_INTERNAL_H_
#define TANDEM_TENSOR_OPS_INTERNAL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem::internal {

// "f32[2, 3]" (or "undefined").
std::string Describe(const Tensor& t);

// Defined; otherwise an error naming `op` and `arg`.
absl::Status CheckDefined(const Tensor& t, const char* op, const char* arg);
// Defined and on the CPU; otherwise an error naming `op` and `arg`.
absl::Status CheckCpu(const Tensor& t, const char* op, const char* arg);
// Defined and of dtype f32 or f64 (on any device: the op's definition
// checked the device with OpDevice).
absl::Status CheckFloat(const Tensor& t, const char* op, const char* arg);
// Defined and floating (f32, f64, f16 or bf16): for ops whose kernels
// take 16-bit dtypes on some devices (each kernel refuses what it lacks).
absl::Status CheckFloating(const Tensor& t, const char* op, const char* arg);

// PyTorch's "Expected all tensors to be on the same device" naming `a`,
// `b` and `op`.
absl::Status DeviceMismatch(const char* op, Device a, Device b);

// The device an op runs on: that of its defined inputs (the CPU when none
// is defined); DeviceMismatch of the first two that differ. Copies no
// tensor (this runs on every op call).
template <typename... Ts>
absl::StatusOr<Device> OpDevice(const char* op, const Ts&... tensors) {
  Device first;
  bool found = false;
  const Tensor* other = nullptr;
  auto visit = [&](const Tensor& t) {
    if (!t.defined() || other != nullptr) return;
    if (!found) {
      first = t.device();
      found = true;
    } else if (t.device() != first) {
      other = &t;
    }
  };
  (visit(tensors), ...);
  if (other != nullptr) return DeviceMismatch(op, first, other->device());
  return first;
}
// The gradient handed to an op's backward is defined and on the op's
// device (`device`); an InternalError naming `op` otherwise (the autograd
// engine keeps gradients on their tensors' devices, so this is a bug).
absl::Status CheckGradDevice(const Tensor& g, Device device, const char* op);

// Same dtype for both (after CheckFloat of each).
absl::Status CheckSameDType(const Tensor& a, const Tensor& b, const char* op);

// The product op(a) op(b) of two 2-d tensors is [m, n] with inner size k.
// InvalidArgument naming both operands when the inner sizes differ (MatMul's
// check, for every device and dtype).
struct MatMulDims {
  int64_t m = 0, n = 0, k = 0;
};
absl::StatusOr<MatMulDims> MatMulDimsOf(const Tensor& a, const Tensor& b,
                                        bool transpose_a, bool transpose_b);

// Linear's x [batch, in] against weight [out_features, in_features]:
// InvalidArgument naming both when the feature counts differ (Linear's
// check, for every device and dtype); both tensors must already be 2-d.
absl::Status CheckLinearFeatures(const Tensor& x, const Tensor& weight);

// CrossEntropy's error for the label at `index` of value `label` outside
// [0, C) of logits [N, C] (every device's kernel reads the labels itself).
absl::Status LabelOutOfRange(const Tensor& logits, int64_t index,
                             int64_t label);

// Maps dim (negative counts from the end) into [0, ndim); InvalidArgument
// naming the op and shape otherwise.
absl::StatusOr<int64_t> NormalizeDim(int64_t dim, const Tensor& t,
                                     const char* op);

// Splits t's shape around `dim` into (outer, size, inner) so that element
// (o, s, i) sits at (o * size + s) * inner + i.
struct DimSplit {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
};
DimSplit SplitAt(const Shape& shape, int64_t dim);

// Calls f(float{}) or f(double{}) for an f32/f64 dtype (checked earlier).
template <typename F>
decltype(auto) DispatchFloat(DType dtype, F&& f) {
  if (dtype == DType::kF64) return f(double{});
  return f(float{});
}

// Broadcasting of the binary ops (Add, Sub, Mul, Div), shared by the CPU
// and device kernels. The output is walked as [outer, inner]; element
// (o, i) of operand X is X[o * outer_stride + i * inner_stride]. Strides
// are 0 (broadcast) or the natural ones.
struct BroadcastOperand {
  int64_t outer_stride = 0;
  int64_t inner_stride = 1;
  bool broadcast = false;  // X has fewer elements than the output
};

struct BroadcastPlan {
  Shape out_shape;
  int64_t outer = 1;
  int64_t inner = 0;
  BroadcastOperand a, b;
};

// The plan for `a op b` under the rules of tensor/ops.h (equal shapes, a
// trailing-dims suffix, or a one-element operand); InvalidArgument naming
// `op` and both shapes otherwise. Checks shapes only.
absl::StatusOr<BroadcastPlan> MakeBroadcastPlan(const Tensor& a,
                                                const Tensor& b,
                                                const char* op);

// An uninitialised CPU tensor of `shape`/`dtype`, or the allocation error.
inline absl::StatusOr<Tensor> NewLike(const Shape& shape, DType dtype) {
  return Tensor::Empty(shape, dtype, Device::CPU());
}

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_OPS_INTERNAL_H_
