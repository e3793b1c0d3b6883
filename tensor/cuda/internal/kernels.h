// Internal: host-side launchers of tandem's CUDA kernels (the .cu files in
// this folder), on raw device pointers. No Tensor, no autograd, no absl:
// tensor/cuda/ops/ checks arguments, allocate outputs and scratch through
// the caching allocator, and turn the returned cudaError_t into a Status.
//
// Every launcher queues its kernels on `stream` and returns
// cudaGetLastError() (launch errors only; faults while running surface at
// the next synchronising call). n == 0 launches nothing. Pointers are device
// memory of the dtype named by the `dtype` argument; floating kernels take
// f32, f64, f16 and bf16 and compute in float (f16/bf16, f32) or double
// (f64), rounding f16/bf16 results exactly as base/half.h does.
//
// The arithmetic repeats the CPU kernels' (tensor/ops/) operation by
// operation: the same formulas, the same order of accumulation where one
// thread owns an output, double accumulators where the CPU uses double.
// Kernels are compiled with --fmad=false so no multiply-add is contracted
// that the CPU does not contract. Whole-tensor sums use a fixed two-pass
// tree (deterministic run to run, but not the CPU's sequential order).
// Transcendentals (exp, log, tanh) are CUDA's, within a few ulp of glibc's.
//
// Determinism: no kernel uses floating-point atomics; gradients of
// scattered ops (col2im, max-pool backward) are gathers.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_KERNELS_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"
#include "tensor/dispatch/elementwise_op.h"

namespace tandem::cuda::kernels {

// The elementwise kinds are tandem::BinaryOp / UnaryOp themselves
// (tensor/dispatch/elementwise_op.h has no dependencies nvcc cannot compile).
using Binary = ::tandem::BinaryOp;
using Unary = ::tandem::UnaryOp;

// Doubles of scratch a reduction needs (its per-block partial sums).
inline constexpr int64_t kReduceScratch = 256;

// ---- Fill, convert, in place.
// Each of the n elements of `elem_size` (1, 2, 4 or 8) bytes gets the low
// elem_size bytes of `pattern` (little-endian).
cudaError_t Fill(void* dst, int64_t n, int64_t elem_size, uint64_t pattern,
                 cudaStream_t stream);
// dst[i] = convert(src[i]) with tensor/convert.h's rules, any dtypes.
cudaError_t Convert(const void* src, DType src_dtype, void* dst,
                    DType dst_dtype, int64_t n, cudaStream_t stream);
// dst += alpha * src (dst += src when alpha == 1), alpha rounded to dtype.
cudaError_t AddInPlace(DType dtype, void* dst, const void* src, double alpha,
                       int64_t n, cudaStream_t stream);
// dst *= factor.
cudaError_t Scale(DType dtype, void* dst, double factor, int64_t n,
                  cudaStream_t stream);

// ---- Elementwise with broadcasting (tandem::internal::BroadcastPlan).
struct Broadcast {
  int64_t outer = 1, inner = 0;
  int64_t a_outer = 0, a_inner = 1;  // strides of a
  int64_t b_outer = 0, b_inner = 1;  // strides of b
};
// out[o * inner + i] = a(o, i) op b(o, i).
cudaError_t BinaryForward(Binary op, DType dtype, const Broadcast& plan,
                          const void* a, const void* b, void* out,
                          cudaStream_t stream);
// Operand `which`'s (0: a, 1: b) gradient from g [outer, inner]. The
// operand's strides pick the case: dense (same shape as the output), a row
// (outer stride 0: summed over outer, in order) or a single element (both
// strides 0: a tree sum in double over everything, using `scratch`).
// `accumulate` adds to `out` instead of overwriting it. `a`/`b` may be null
// when the op's derivative does not read them.
cudaError_t BinaryBackward(Binary op, int which, DType dtype,
                           const Broadcast& plan, const void* a, const void* b,
                           const void* g, void* out, bool accumulate,
                           double* scratch, cudaStream_t stream);
// y = f(x); `scalar` for the k*Scalar kinds.
cudaError_t UnaryForward(Unary op, DType dtype, double scalar, const void* x,
                         void* y, int64_t n, cudaStream_t stream);
// out (+)= df(x, y) * g; x or y may be null when df does not read it.
cudaError_t UnaryBackward(Unary op, DType dtype, double scalar, const void* x,
                          const void* y, const void* g, void* out, int64_t n,
                          bool accumulate, cudaStream_t stream);

// ---- Reductions.
// dst[0] = (accumulate ? dst[0] : 0) + (sum of src[0..n)) / divisor, summed
// in double; src and dst dtypes may differ (e.g. f64 partial losses into
// an f32 loss). n == 0 sums to 0 (so 0 / 0 = NaN for a mean).
cudaError_t SumAll(DType src_dtype, const void* src, int64_t n, double divisor,
                   DType dst_dtype, void* dst, bool accumulate, double* scratch,
                   cudaStream_t stream);
// Backward of SumAll over n elements: out[i] (+)= v, v = g[0] / n (mean,
// computed in dtype) or g[0].
cudaError_t SumAllBackward(DType dtype, const void* g, int64_t n, bool mean,
                           void* out, bool accumulate, cudaStream_t stream);
// A tensor walked as [outer, size, inner] around one dim.
struct Split {
  int64_t outer = 1, size = 1, inner = 1;
};
// out[o, i] = sum_k x[o, k, i] (/ size when mean), in double.
cudaError_t SumDim(DType dtype, const void* x, const Split& split, bool mean,
                   void* out, cudaStream_t stream);
cudaError_t SumDimBackward(DType dtype, const void* g, const Split& split,
                           bool mean, void* out, bool accumulate,
                           cudaStream_t stream);
// out[m] (+)= sum over o, i of x[(o * mid + m) * inner + i], in double
// (bias gradients of Linear and Conv2d).
cudaError_t SumOuterInner(DType dtype, const void* x, int64_t outer,
                          int64_t mid, int64_t inner, void* out,
                          bool accumulate, cudaStream_t stream);
// out[(o * mid + m) * inner + i] = v[m] (bias rows / planes).
cudaError_t BroadcastMiddle(DType dtype, const void* v, int64_t outer,
                            int64_t mid, int64_t inner, void* out,
                            cudaStream_t stream);
// out[o, i] = argmax_k x[o, k, i]: first maximum, NaN counts as largest.
// Any dtype. split.size >= 1.
cudaError_t Argmax(DType dtype, const void* x, const Split& split, int64_t* out,
                   cudaStream_t stream);
cudaError_t SoftmaxForward(DType dtype, bool log, const void* x,
                           const Split& split, void* y, cudaStream_t stream);
cudaError_t SoftmaxBackward(DType dtype, bool log, const void* y, const void* g,
                            const Split& split, void* out, bool accumulate,
                            cudaStream_t stream);

// ---- Losses.
// probs [n, c] = softmax(logits); row_loss[i] = logsumexp - logits[i,
// label]. A label outside [0, c) makes row_loss[i] NaN and lowers
// *first_bad (which the caller initialises to n) to i.
// Rows whose label is ignore_index: row_loss 0, counted 0, probs unset;
// the others counted 1.
cudaError_t CrossEntropyForward(DType dtype, const void* logits,
                                const int64_t* labels, int64_t n, int64_t c,
                                int64_t ignore_index, void* probs,
                                double* row_loss, double* counted,
                                int64_t* first_bad, cudaStream_t stream);
// out (+)= s * (probs - onehot(labels)), s = g[0] / counted (mean) or g[0]
// (sum); 0 on rows whose label is ignore_index.
cudaError_t CrossEntropyBackward(DType dtype, const void* probs,
                                 const int64_t* labels, const void* g,
                                 int64_t n, int64_t c, int64_t ignore_index,
                                 bool mean, double counted, void* out,
                                 bool accumulate, cudaStream_t stream);
// sq[i] = (double(p[i]) - double(t[i]))^2.
cudaError_t SquaredDiff(DType dtype, const void* p, const void* t, int64_t n,
                        double* sq, cudaStream_t stream);
// out (+)= sign * (2 g[0] / n) * (p - t), sign = -1 when negate.
cudaError_t MseBackward(DType dtype, const void* p, const void* t,
                        const void* g, int64_t n, bool negate, void* out,
                        bool accumulate, cudaStream_t stream);

// ---- Convolution and pooling (NCHW).
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t out_h = 0, out_w = 0;
};
// col [images][C*kh*kw][out_h*out_w] = im2col of x [images][C][H][W].
cudaError_t Im2Col(DType dtype, const ConvGeometry& geo, const void* x,
                   int64_t images, void* col, cudaStream_t stream);
// dx [images][C][H][W] (+)= col2im(col): each input position gathers the
// column entries copied from it, in the CPU's order.
cudaError_t Col2Im(DType dtype, const ConvGeometry& geo, const void* col,
                   int64_t images, void* dx, bool accumulate,
                   cudaStream_t stream);
// Pooling (pool.cu; tensor/dispatch/op_kernels.h's Pool2dArgs for the device):
// mode 0 max, 1 average, 2 adaptive average.
struct PoolGeometry {
  int mode = 0;
  int64_t planes = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  bool count_include_pad = true;
};
// y = each window's maximum or mean; for max, argmax = the maximum's index
// in the H*W plane (first maximum; the first NaN).
cudaError_t PoolForward(DType dtype, const PoolGeometry& geo, const void* x,
                        void* y, int64_t* argmax, cudaStream_t stream);
// dx = the gradient of y (a gather per input position, in the CPU's order;
// every element written). argmax is used by max only.
cudaError_t PoolBackward(DType dtype, const PoolGeometry& geo, const void* g,
                         const int64_t* argmax, void* dx, cudaStream_t stream);

// Permute (permute.cu; tensor/dispatch/permute_kernels.h for the device): out's
// element i (row-major over `size`) is x's element sum_d idx_d * stride[d]
// (x's stride, in elements, of out's dim d). Elements are moved as
// `elem_size` (1, 2, 4 or 8) bytes, so every dtype is exact. The plan is
// passed by value to the kernel, hence the fixed rank bound (PyTorch's
// MAX_DIMS); ops_permute.cc merges dims first, so only permutations with
// more than kPermuteMaxRank unmergeable dims are refused.
inline constexpr int kPermuteMaxRank = 25;
struct PermutePlan {
  int rank = 0;
  int64_t size[kPermuteMaxRank] = {};
  int64_t stride[kPermuteMaxRank] = {};
};
cudaError_t Permute(int64_t elem_size, const PermutePlan& plan, const void* x,
                    void* out, int64_t n, cudaStream_t stream);

// ---- Optimizer updates (tensor/optim/sgd.h, adamw.h), f32 and f64.
struct SgdArgs {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false, first = false;
};
// `buf` is null without momentum.
cudaError_t SgdStep(DType dtype, void* p, const void* g, void* buf, int64_t n,
                    const SgdArgs& args, cudaStream_t stream);
struct AdamWArgs {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double decay = 1, step_size = 0, bias2_sqrt = 1;
  bool maximize = false;
};
// `v_max` is null without amsgrad.
cudaError_t AdamWStep(DType dtype, void* p, const void* g, void* m, void* v,
                      void* v_max, int64_t n, const AdamWArgs& args,
                      cudaStream_t stream);

}  // namespace tandem::cuda::kernels

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_KERNELS_H_
