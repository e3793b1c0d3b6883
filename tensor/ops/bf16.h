// Internal: the native bf16 CPU kernels of MatMul and Linear (oneDNN's
// matmul primitive, f32 accumulation, bf16 output; tensor/cpu/gemm_bf16.h).
// The CPU kernels of the MatMul, Linear and ColumnSums rows
// (ops/matmul.cc) call these for bf16 tensors, on arguments the ops
// checked (every operand bf16); the ops' one backward formula calls the
// same rows, so gradients are bf16, computed with the same kernel.
#ifndef TANDEM_TENSOR_OPS_BF16_H_
#define TANDEM_TENSOR_OPS_BF16_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem::internal {

// c = op(a) op(b), or c += that (one rounding) when `accumulate`.
absl::Status MatMulBf16(const Tensor& a, const Tensor& b, bool transpose_a,
                        bool transpose_b, const Tensor& c, bool accumulate);
// y [batch, out] = x weight^T + bias (bias may be undefined).
absl::Status LinearBf16(const Tensor& x, const Tensor& weight,
                        const Tensor& bias, const Tensor& y);
// out [cols] = (or +=) the column sums of g [rows, cols], summed in f32.
void ColumnSumsBf16(const Tensor& g, const Tensor& out, bool accumulate);

// Relu of an f16 or bf16 CPU tensor, in its own dtype: the output and the
// tensor saved for backward are 16-bit, so a ReLU under autocast keeps no
// f32 copies alive for backward (the f32 route of autocast_state.h would
// save an f32 widening of the input and keep two f32 tensors in the graph).
// Bit-identical to that route, forward and backward: each element is
// widened exactly, passed through relu in f32 and rounded back, which for a
// 16-bit input reproduces it (NaNs come out canonical, as the f32 route's
// rounding makes them).
absl::StatusOr<Tensor> ReluLowPrecision(const Tensor& x);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_OPS_BF16_H_
