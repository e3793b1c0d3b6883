// Internal: the native bf16 CPU kernels of MatMul and Linear (oneDNN's
// matmul primitive, f32 accumulation, bf16 output; tensor/cpu/gemm_bf16.h).
// MatMul/Linear in ops_matmul.cc call these for bf16 operands after their
// routing (tensor/autocast_state.h); every operand must be bf16. Same shape
// rules, messages and autograd contract as the f32 ops; gradients are bf16,
// computed with the same kernel.
#ifndef TANDEM_TENSOR_OPS_BF16_H_
#define TANDEM_TENSOR_OPS_BF16_H_

#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem::internal {

absl::StatusOr<Tensor> MatMulBf16(const Tensor& a, const Tensor& b,
                                  bool transpose_a, bool transpose_b);
absl::StatusOr<Tensor> LinearBf16(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_OPS_BF16_H_
