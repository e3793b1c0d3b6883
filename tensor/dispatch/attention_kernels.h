// ScaledDotProductAttention's kernel signatures and rows of the kernel
// table (tensor/dispatch/op_table.h), for kernel libraries (tensor/cuda), not
// for users. The op's definition (tensor/ops/attention.cc) checked the
// arguments and allocated every output on the inputs' device; a kernel
// computes in its device's stream order.
//
// Shapes: q, k, v, y, gy, gq, gk, gv [B, H, T, hd]; probs and mask
// [B, H, T, T]; all contiguous, one float dtype. mask is undefined without
// dropout, else holds 0 or 1 / (1 - p). scale is 1 / sqrt(hd).
#ifndef TANDEM_TENSOR_DISPATCH_ATTENTION_KERNELS_H_
#define TANDEM_TENSOR_DISPATCH_ATTENTION_KERNELS_H_

#include "absl/status/status.h"
#include "tensor/dispatch/op_table.h"
#include "tensor/tensor.h"

namespace tandem {

// probs = softmax(scale * q k^T, causally masked: probs[i, j] = 0 for j > i);
// y = (probs * mask) v.
using AttentionForwardKernel = absl::Status(const Tensor& q, const Tensor& k,
                                            const Tensor& v, const Tensor& mask,
                                            bool causal, double scale,
                                            const Tensor& probs,
                                            const Tensor& y);
// With A = probs * mask, dA = gy v^T, dP = dA * mask,
// dS = probs * (dP - rowsum(probs * dP)):
// gq = scale * dS k, gk = scale * dS^T q, gv = A^T gy (overwritten).
using AttentionBackwardKernel = absl::Status(
    const Tensor& gy, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& probs, const Tensor& mask, bool causal, double scale,
    const Tensor& gq, const Tensor& gk, const Tensor& gv);

TANDEM_OP_ROW(AttentionForwardKernels, AttentionForwardKernel,
              "ScaledDotProductAttention")
TANDEM_OP_ROW(AttentionBackwardKernels, AttentionBackwardKernel,
              "ScaledDotProductAttentionBackward")

}  // namespace tandem

#endif  // TANDEM_TENSOR_DISPATCH_ATTENTION_KERNELS_H_
