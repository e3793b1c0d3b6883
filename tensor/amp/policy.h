// Autocast's op policy: the ONE table saying, for every op tensor/ops.h
// routes through autocast, which dtype its inputs are cast to inside an
// enabled region (tensor/amp/autocast.h).
//
// It follows PyTorch's autocast op lists (aten/src/ATen/autocast_mode.cpp,
// 1.13):
//   kLowerPrecision  mm/matmul, linear, conv2d (PyTorch's
//                    "lower_precision_fp" list on CPU, "fp16" on CUDA):
//                    f32 inputs cast to the region's dtype (f64 left alone),
//                    f32 accumulation inside the kernel, low-precision out.
//   kF32             mse_loss, cross_entropy (nll_loss + log_softmax),
//                    softmax, log_softmax, sum, mean: f16/bf16 inputs cast
//                    to f32, f32 out (PyTorch's "fp32" list).
//   kPromote         add, sub, mul, div and every op not listed: inputs cast
//                    to the widest floating input dtype (PyTorch's
//                    "promote" list and its type promotion), so a bf16
//                    activation plus an f32 tensor gives f32.
// Where tandem differs: PyTorch's CPU lists leave softmax, log_softmax, sum
// and mean in the input dtype (only CUDA's fp32 list has them); tandem
// keeps them in f32 on every device, the safer choice for losses and
// reductions, as the CUDA lists do. Single-input elementwise ops (relu,
// sigmoid, tanh, exp, log, neg, max_pool2d) run in their input's dtype on
// both, computed in float and rounded (tensor/autocast_state.h).
#ifndef TANDEM_TENSOR_AMP_POLICY_H_
#define TANDEM_TENSOR_AMP_POLICY_H_

#include <cstdint>

#include "tensor/autocast_state.h"

namespace tandem::amp {

enum class CastPolicy : int8_t { kLowerPrecision, kF32, kPromote };

// The table's entry for `op`.
CastPolicy PolicyFor(AmpOp op);
// "matmul", "linear", ... (a static string), for messages and docs.
const char* AmpOpName(AmpOp op);

}  // namespace tandem::amp

#endif  // TANDEM_TENSOR_AMP_POLICY_H_
