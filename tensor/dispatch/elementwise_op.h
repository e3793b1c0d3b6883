// The elementwise op kinds, in a header with no dependencies so that the
// CPU kernel table (tensor/dispatch/op_kernels.h) and the CUDA launchers
// (tensor/cuda/internal/kernels.h, compiled by nvcc without absl or Tensor)
// name one enum: no mirrored list to keep in step.
#ifndef TANDEM_TENSOR_DISPATCH_ELEMENTWISE_OP_H_
#define TANDEM_TENSOR_DISPATCH_ELEMENTWISE_OP_H_

#include <cstdint>

namespace tandem {

enum class BinaryOp : int8_t { kAdd, kSub, kMul, kDiv };

// Elementwise functions; the k*Scalar kinds combine x with a double scalar
// (converted to x's dtype), e.g. kMulScalar is x * scalar.
enum class UnaryOp : int8_t {
  kNeg,
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kAddScalar,
  kSubScalar,
  kMulScalar,
  kDivScalar,
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_DISPATCH_ELEMENTWISE_OP_H_
