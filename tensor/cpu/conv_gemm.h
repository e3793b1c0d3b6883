// Conv2d on host memory as im2col + GEMM over chunks of the batch (NCHW
// activations, OIHW weights): tandem's default CPU convolution.
//
// Each GEMM covers as many images as it takes to reach ~512 output pixels:
// the chunk's column matrices sit side by side, so ResNet's small feature
// maps (1x1 to 8x8 at 32x32 inputs) give GEMMs with hundreds of columns
// rather than GEMVs, and the weight gradient is a product with a long K
// instead of `batch` rank-few updates of the whole weight; a large map is
// one image per GEMM, written in place. Kernel taps that read only padding
// (cpu::LiveTaps) are left out of K. Results differ from oneDNN's and from
// a per-image loop in the last bits (another summation order); they are
// deterministic for a given shape and thread count.
//
//   cpu::ConvProblem p{.geometry = geo, .batch = n, .out_channels = o};
//   TANDEM_RETURN_IF_ERROR(cpu::ConvGemmForward<float>(p, x, w, bias, y));
//
// Scratch is allocated per call (one chunk's column matrix and its
// [O, chunk pixels] output or gradient). Thread-safe: no shared state
// beyond cpu::Gemm's.
#ifndef TANDEM_TENSOR_CPU_CONV_GEMM_H_
#define TANDEM_TENSOR_CPU_CONV_GEMM_H_

#include "absl/status/status.h"
#include "tensor/cpu/im2col.h"

namespace tandem::cpu {

// y [N, O, OH, OW] = conv(x [N, C, H, W], w [O, C, KH, KW]) + bias [O]
// (bias may be null). Overwrites y.
template <typename T>
absl::Status ConvGemmForward(const ConvProblem& p, const T* x, const T* w,
                             const T* bias, T* y);

// The gradients of the convolution from dy [N, O, OH, OW]: dw [O, C, KH, KW]
// from x when dw is not null, dx [N, C, H, W] from w when dx is not null.
// Each is overwritten, or added to when its accumulate flag is set.
template <typename T>
absl::Status ConvGemmBackward(const ConvProblem& p, const T* x, const T* w,
                              const T* dy, T* dw, bool accumulate_dw, T* dx,
                              bool accumulate_dx);

}  // namespace tandem::cpu

#endif  // TANDEM_TENSOR_CPU_CONV_GEMM_H_
