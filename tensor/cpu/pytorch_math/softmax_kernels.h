// Float softmax, log-softmax, their gradients and the mean NLL loss over the
// last dimension of a row-major [rows, cols] matrix, in the order PyTorch
// 1.13 computes them on an AVX2 CPU (its vectorised lastdim kernels: 8-lane
// reductions with the tail blended into the first lanes, lanes combined
// first to last, SLEEF's expf/logf, the fused multiply-adds its compiler
// formed; the NLL sum as its cascade), so results equal PyTorch's bit for
// bit. docs/pytorch_compat.md gives the recipe.
//
// Thread-safety: pure functions on caller-owned memory.
#ifndef TANDEM_TENSOR_CPU_PYTORCH_MATH_SOFTMAX_KERNELS_H_
#define TANDEM_TENSOR_CPU_PYTORCH_MATH_SOFTMAX_KERNELS_H_

#include <cstdint>

namespace tandem::internal {

// y = softmax(x) row by row: m = max, e = exp(x - m), y = e * (1 / sum e).
void SoftmaxRows(const float* x, int64_t rows, int64_t cols, float* y);

// y = x - m - log(sum exp(x - m)) row by row.
void LogSoftmaxRows(const float* x, int64_t rows, int64_t cols, float* y);

// gx = (g - sum(g * y)) * y, y the softmax output.
void SoftmaxBackwardRows(const float* g, const float* y, int64_t rows,
                         int64_t cols, float* gx);

// gx = g - exp(y) * sum(g), y the log-softmax output.
void LogSoftmaxBackwardRows(const float* g, const float* y, int64_t rows,
                            int64_t cols, float* gx);

// The sum over rows r with labels[r] != ignore_index of -logp[r, labels[r]]
// (those labels in [0, cols); callers check), in PyTorch's cascade, divided
// by the number of such rows when `mean` (none: NaN), as nll_loss does.
float NllLoss(const float* logp, const int64_t* labels, int64_t rows,
              int64_t cols, int64_t ignore_index, bool mean);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_CPU_PYTORCH_MATH_SOFTMAX_KERNELS_H_
