// The dropout mask, drawn as PyTorch 1.13's CPU dropout draws it, for the
// ops that drop (Dropout, ScaledDotProductAttention). Internal to tensor/
// and its kernel libraries.
#ifndef TANDEM_TENSOR_OPS_DROPOUT_MASK_H_
#define TANDEM_TENSOR_OPS_DROPOUT_MASK_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace tandem::internal {

// A CPU tensor of `shape` and `dtype` (floating) whose elements are, in
// order, 1 / (1 - p) (kept) or 0: for each, one gen.Random64() v, kept when
// (v & (2^53 - 1)) * 2^-53 < 1 - p (PyTorch's bernoulli_(1 - p) without
// MKL); 1 / (1 - p) rounded as noise.div_(1 - p) rounds it in `dtype`.
// Requires 0 < p < 1 (callers check). Draws shape's element count.
absl::StatusOr<Tensor> DropoutMask(const Shape& shape, DType dtype, double p,
                                   Generator& gen);

// The attention ops' dropout arguments: InvalidArgument naming `op` when
// dropout_p is outside [0, 1) or dropout_p > 0 comes without a generator.
absl::Status CheckAttentionDropout(const char* op, double dropout_p,
                                   const Generator* gen);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_OPS_DROPOUT_MASK_H_
