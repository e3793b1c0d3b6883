// Internal helpers shared by the ops_*.cc files: argument checks with
// uniform messages, float dispatch, and dim arithmetic.
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

// Defined and on the CPU; otherwise an error naming `op` and `arg`.
absl::Status CheckCpu(const Tensor& t, const char* op, const char* arg);
// CheckCpu and dtype f32 or f64.
absl::Status CheckFloat(const Tensor& t, const char* op, const char* arg);
// Same dtype for both (after CheckFloat of each).
absl::Status CheckSameDType(const Tensor& a, const Tensor& b, const char* op);

// The product op(a) op(b) of two 2-d tensors is [m, n] with inner size k.
// InvalidArgument naming both operands when the inner sizes differ. Shared
// by every MatMul kernel (f32/f64 and bf16).
struct MatMulDims {
  int64_t m = 0, n = 0, k = 0;
};
absl::StatusOr<MatMulDims> MatMulDimsOf(const Tensor& a, const Tensor& b,
                                        bool transpose_a, bool transpose_b);

// Linear's x [batch, in] against weight [out_features, in_features]:
// InvalidArgument naming both when the feature counts differ. Shared by every
// Linear kernel (f32/f64 and bf16); both tensors must already be 2-d.
absl::Status CheckLinearFeatures(const Tensor& x, const Tensor& weight);

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
