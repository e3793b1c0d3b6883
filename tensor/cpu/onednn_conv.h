// Conv2d on oneDNN's convolution primitives (f32, NCHW activations, OIHW
// weights, row-major host memory), made the way PyTorch 1.13 makes them on
// the CPU (its mkldnn backend through ideep): direct algorithm, activations
// given as NCHW, weights, the output and its gradient in the layouts oneDNN
// picks ("any": on AVX2, 8-channel blocks), a user scratchpad, OpenMP
// threads as tandem's BLAS thread count. With the same oneDNN build (the
// system's libdnnl, which Debian's PyTorch also links) and thread count the
// results equal PyTorch's bit for bit; docs/pytorch_compat.md.
//
//   cpu::ConvProblem p{.geometry = geo, .batch = n, .out_channels = o};
//   TANDEM_RETURN_IF_ERROR(cpu::OneDnnConvForward(p, x, w, bias, y));
//
// Primitives are compiled once per problem and thread and cached (a few
// per thread, least recent dropped), so a training loop pays the JIT once.
// Thread-safety: each thread has its own engine, stream and cache; calls
// from several threads run concurrently.
#ifndef TANDEM_TENSOR_CPU_ONEDNN_CONV_H_
#define TANDEM_TENSOR_CPU_ONEDNN_CONV_H_

#include <cstdint>

#include "absl/status/status.h"
#include "tensor/cpu/im2col.h"

namespace tandem::cpu {

// Whether PyTorch 1.13 sends this f32 CPU convolution to oneDNN (its
// use_mkldnn rule, one thread, no groups or dilation): a 1x1 unstrided
// kernel needs a batch of at least 16; otherwise a batch above 1 or more
// than 20480 input elements (or kernels larger than 3x3 both ways).
bool PyTorchUsesOneDnn(const ConvProblem& p);

// y [N, O, OH, OW] = conv(x [N, C, H, W], w [O, C, KH, KW]) + bias [O]
// (bias may be null). Overwrites y. Internal on a oneDNN failure.
absl::Status OneDnnConvForward(const ConvProblem& p, const float* x,
                               const float* w, const float* bias, float* y);

// dw [O, C, KH, KW] and, when db is not null, db [O] from x and dy
// [N, O, OH, OW]. Overwrites dw and db.
absl::Status OneDnnConvBackwardWeights(const ConvProblem& p, const float* x,
                                       const float* dy, float* dw, float* db);

// dx [N, C, H, W] from w and dy. Overwrites dx.
absl::Status OneDnnConvBackwardData(const ConvProblem& p, const float* w,
                                    const float* dy, float* dx);

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_ONEDNN_CONV_H_
