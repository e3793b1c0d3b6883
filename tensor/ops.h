// Differentiable tensor ops (CPU kernels; f32 and f64 unless noted).
//
// Every op is a free function returning absl::StatusOr<Tensor>: bad input
// (shape or dtype mismatch, undefined tensor, unsupported dtype or device)
// comes back as InvalidArgument/Unimplemented with a message naming the
// shapes and dtypes, never a crash. Outputs are new contiguous tensors,
// except Reshape/Flatten, which are views. Each op records a backward node
// when grad mode is on and an input requires grad (tensor/autograd/autograd.h).
// Zero-sized dims are fine everywhere (BLAS calls with a zero dim are
// skipped). There is no implicit dtype promotion: mixing f32 and f64 is an
// error.
//
// Low precision (f16/bf16) and autocast (tensor/amp/autocast.h): bf16
// MatMul/Linear run natively (oneDNN, f32 accumulation, bf16 out);
// every other op given an f16/bf16 input computes in f32 and rounds its
// result to the widest input dtype, as PyTorch's CPU kernels do (an f16/bf16
// operand mixed with an f32 one gives f32). Inside an autocast region the
// ops first cast their inputs by the policy table of tensor/amp/policy.h
// (tensor/autocast_state.h has the dispatch rule).
//
//   TANDEM_ASSIGN_OR_RETURN(Tensor h, Linear(x, w1, b1));   // x W1^T + b1
//   TANDEM_ASSIGN_OR_RETURN(h, Relu(h));
//   TANDEM_ASSIGN_OR_RETURN(Tensor logits, Linear(h, w2, b2));
//   TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, labels));
//   TANDEM_RETURN_IF_ERROR(loss.Backward());
//
// Matrix products use OpenBLAS with ONE thread per process by default
// (simulated ranks share the cores); change it with SetBlasNumThreads in
// tensor/cpu/blas.h.
//
// Thread-safety: ops are reentrant; they touch only their arguments.
#ifndef TANDEM_TENSOR_OPS_H_
#define TANDEM_TENSOR_OPS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem {

// ---- Matrix products (2-d).
// op(a) · op(b), where op transposes when the flag is set: a is [M, K]
// ([K, M] if transpose_a), b is [K, N] ([N, K] if transpose_b); result
// [M, N]. Transposes are gemm flags, never copies.
absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b,
                              bool transpose_a = false,
                              bool transpose_b = false);
// PyTorch's nn.functional.linear: x [N, in] · weight[out, in]^T + bias[out]
// -> [N, out]. `bias` may be undefined (no bias). Backward is exactly three
// GEMMs plus a column sum for the bias, writing straight into existing
// gradient buffers (beta = 1) or fresh ones (beta = 0).
absl::StatusOr<Tensor> Linear(const Tensor& x, const Tensor& weight,
                              const Tensor& bias);

// ---- Elementwise arithmetic with broadcasting. Allowed operand shapes:
// equal; one shape a suffix of the other ([N, M] op [M], [N, C, H, W] op
// [H, W], anything op a 0-d scalar); or one operand with a single element
// whose dims are all 1 ([1], [1, 1]). The result has the larger shape.
absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Sub(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Mul(const Tensor& a, const Tensor& b);
absl::StatusOr<Tensor> Div(const Tensor& a, const Tensor& b);
// With a Python-style scalar (converted to a's dtype).
absl::StatusOr<Tensor> Add(const Tensor& a, double b);
absl::StatusOr<Tensor> Sub(const Tensor& a, double b);
absl::StatusOr<Tensor> Mul(const Tensor& a, double b);
absl::StatusOr<Tensor> Div(const Tensor& a, double b);
absl::StatusOr<Tensor> Neg(const Tensor& x);

// ---- Elementwise functions.
absl::StatusOr<Tensor> Relu(const Tensor& x);  // grad 0 at x == 0, as torch
absl::StatusOr<Tensor> Sigmoid(const Tensor& x);
absl::StatusOr<Tensor> Tanh(const Tensor& x);
absl::StatusOr<Tensor> Exp(const Tensor& x);
absl::StatusOr<Tensor> Log(const Tensor& x);
// GELU as PyTorch's nn.functional.gelu(x, approximate=...): kNone is exact,
// x * Phi(x) = x/2 (1 + erf(x / sqrt 2)); kTanh is
// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Both have exact gradients.
enum class GeluApproximation : int8_t { kNone, kTanh };
absl::StatusOr<Tensor> Gelu(
    const Tensor& x, GeluApproximation approximate = GeluApproximation::kNone);

// ---- Along a dim (negative counts from the end; default the last dim).
// Numerically stable (max subtracted).
absl::StatusOr<Tensor> Softmax(const Tensor& x, int64_t dim = -1);
absl::StatusOr<Tensor> LogSoftmax(const Tensor& x, int64_t dim = -1);

// ---- Reductions. Sum of no elements is 0; Mean of no elements is NaN.
// Over all elements -> 0-d tensor.
absl::StatusOr<Tensor> Sum(const Tensor& x);
absl::StatusOr<Tensor> Mean(const Tensor& x);
// Over one dim; keepdim keeps it with size 1.
absl::StatusOr<Tensor> Sum(const Tensor& x, int64_t dim, bool keepdim = false);
absl::StatusOr<Tensor> Mean(const Tensor& x, int64_t dim, bool keepdim = false);
// Index of the largest element along `dim` (first one on ties; NaN counts
// as largest), as an i64 tensor without that dim. Not differentiable. Any
// dtype. InvalidArgument when that dim has size 0.
absl::StatusOr<Tensor> Argmax(const Tensor& x, int64_t dim = -1);

// ---- Shape (views: share storage, no copy). One dim of Reshape's shape
// may be -1. Flatten merges dims start_dim..end_dim (inclusive; negative
// counts from the end) like torch.flatten; nn.Flatten uses start_dim = 1.
absl::StatusOr<Tensor> Reshape(const Tensor& x, Shape shape);
absl::StatusOr<Tensor> Flatten(const Tensor& x, int64_t start_dim = 0,
                               int64_t end_dim = -1);
// PyTorch's x.permute(dims).contiguous() (tensor/ops/permute.cc): out's
// dim k is x's dim dims[k] (negative counts from the end); a copy, since
// tandem's tensors are contiguous. Any dtype; the gradient is permuted back.
// InvalidArgument unless dims is a permutation of x's dims.
absl::StatusOr<Tensor> Permute(const Tensor& x,
                               const std::vector<int64_t>& dims);

// ---- Convolution and pooling (NCHW).
struct Conv2dOptions {
  std::array<int64_t, 2> stride = {1, 1};   // (h, w), >= 1
  std::array<int64_t, 2> padding = {0, 0};  // (h, w), zeros, >= 0
};
// x [N, C, H, W], weight [O, C, kh, kw], bias [O] or undefined ->
// [N, O, (H + 2ph - kh) / sh + 1, (W + 2pw - kw) / sw + 1]. im2col + GEMM.
absl::StatusOr<Tensor> Conv2d(const Tensor& x, const Tensor& weight,
                              const Tensor& bias,
                              const Conv2dOptions& options = {});

// ---- Pooling (NCHW; tensor/ops/pool.cc), PyTorch's max_pool2d,
// avg_pool2d and adaptive_avg_pool2d (dilation 1). Each output element is
// computed by one device kernel; the backward is one op too.
struct MaxPool2dOptions {
  std::array<int64_t, 2> kernel = {2, 2};  // (h, w), >= 1
  // (h, w); {0, 0} means "same as kernel", PyTorch's default.
  std::array<int64_t, 2> stride = {0, 0};
  // (h, w), implicit -inf on each side; at most half the kernel (PyTorch's
  // "pad should be at most half of kernel size").
  std::array<int64_t, 2> padding = {0, 0};
};
// x [N, C, H, W] -> [N, C, (H + 2ph - kh) / sh + 1, (W + 2pw - kw) / sw + 1]
// (floor). The gradient goes to the first maximum of each window (the
// first NaN, if any).
absl::StatusOr<Tensor> MaxPool2d(const Tensor& x,
                                 const MaxPool2dOptions& options = {});

struct AvgPool2dOptions {
  std::array<int64_t, 2> kernel = {2, 2};   // (h, w), >= 1
  std::array<int64_t, 2> stride = {0, 0};   // {0, 0}: same as kernel
  std::array<int64_t, 2> padding = {0, 0};  // zeros, at most half the kernel
  // Padded positions count in the divisor (PyTorch's default).
  bool count_include_pad = true;
  // Output size rounded up, as long as the last window starts inside the
  // input or its left padding (PyTorch's rule).
  bool ceil_mode = false;
};
// x [N, C, H, W] -> window means [N, C, oh, ow]; oh = (H + 2ph - kh) / sh + 1
// (floor, or ceil with ceil_mode). A window's divisor is its size clipped to
// the padded input (count_include_pad) or to the input.
absl::StatusOr<Tensor> AvgPool2d(const Tensor& x,
                                 const AvgPool2dOptions& options = {});
// x [N, C, H, W] -> [N, C, oh, ow]: output (i, j) is the mean of rows
// [floor(i H / oh), ceil((i + 1) H / oh)) and the columns likewise.
// output_size (oh, ow) >= 0; H and W >= 1. (1, 1) is a global average.
absl::StatusOr<Tensor> AdaptiveAvgPool2d(const Tensor& x,
                                         std::array<int64_t, 2> output_size);

// ---- Normalisation (tensor/ops/batch_norm.cc, tensor/ops/layer_norm.cc).
// PyTorch's torch.nn.functional.batch_norm(x, running_mean, running_var,
// weight, bias, training, momentum, eps), arguments in tandem's order.
// x is [N, C, *] ([N, C], [N, C, L], [N, C, H, W], ...), f32 or f64, or
// f16/bf16 with f32 parameters (computed in f32, output in x's dtype, as
// PyTorch's mixed-type CPU kernel); weight, bias, running_mean and
// running_var are [C] of x's dtype (f32 for f16/bf16 x), weight and bias
// may be undefined (no affine), the running statistics both or neither.
//   training: each channel normalised with the batch's mean and biased
//     variance over every dim but 1; the running statistics, when defined,
//     are updated in place (never recorded): r = (1 - momentum) r +
//     momentum * s, with the unbiased variance. A batch with one value per
//     channel is an error (PyTorch's "Expected more than 1 value per
//     channel when training"); an empty batch gives an empty output and
//     leaves the statistics alone.
//   not training: normalised with running_mean and running_var (required).
// y = (x - mean) / sqrt(var + eps) * weight + bias. Gradients for x, weight
// and bias (PyTorch's formulas). The per-channel pieces, for SyncBatchNorm,
// are in tensor/ops/batch_norm.h.
absl::StatusOr<Tensor> BatchNorm(const Tensor& x, const Tensor& weight,
                                 const Tensor& bias, const Tensor& running_mean,
                                 const Tensor& running_var, bool training,
                                 double momentum, double eps);
// PyTorch's torch.nn.functional.layer_norm: x [*, normalized_shape] (the
// trailing dims equal normalized_shape, which is not empty) normalised over
// those dims, per leading index: y = (x - mean) / sqrt(var + eps) * weight
// + bias with the biased variance; weight and bias have normalized_shape
// (or are undefined: no affine). f32 or f64; f16/bf16 operands are
// computed in f32 and the output has x's dtype. Gradients for x, weight
// and bias.
absl::StatusOr<Tensor> LayerNorm(const Tensor& x, const Shape& normalized_shape,
                                 const Tensor& weight, const Tensor& bias,
                                 double eps = 1e-5);
// ---- End of normalisation.

// ---- Losses (0-d result).
// PyTorch's F.cross_entropy(logits, labels, ignore_index=-100,
// reduction='mean'): logits [N, C] (f32/f64), labels [N] of dtype i64 with
// values in [0, C) or equal to options.ignore_index. Ignored rows add
// nothing and get a zero gradient; kMean divides by the number of rows not
// ignored (none: NaN, as PyTorch; N == 0 likewise), kSum does not divide.
// Errors name the offending label's index and value. The two-argument form
// uses the defaults (ignore_index -100, mean), as PyTorch's does.
enum class LossReduction : int8_t { kMean, kSum };
struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  LossReduction reduction = LossReduction::kMean;
};
absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits, const Tensor& labels);
absl::StatusOr<Tensor> CrossEntropy(const Tensor& logits, const Tensor& labels,
                                    const CrossEntropyOptions& options);
// mean((prediction - target)^2); same shape and dtype. Both get gradients.
absl::StatusOr<Tensor> Mse(const Tensor& prediction, const Tensor& target);

// ---- GPT ops (Embedding, Dropout, CrossEntropy options;
// tensor/ops/embedding.cc, tensor/ops/dropout.cc, tensor/ops/loss.cc).
//
// PyTorch's nn.functional.embedding(indices, weight): indices of dtype i64
// or i32, any shape (0-d too), values in [0, V); weight [V, D] (f32/f64;
// f16/bf16 gathered through f32, exact) -> indices.shape + [D], row
// indices[...] of weight. The gradient of weight is dense ([V, D]): the rows
// of the output's gradient added into the rows they came from, in the order
// of the indices (deterministic on every device). indices get no gradient.
// An index outside [0, V) is InvalidArgument naming its value, its position
// and V ("index out of range in self", as PyTorch says); the indices are
// read on the host for that check (a copy when they live on a device).
absl::StatusOr<Tensor> Embedding(const Tensor& indices, const Tensor& weight);

class Generator;
// PyTorch's nn.functional.dropout(x, p, training): in training, each
// element is kept with probability 1 - p and scaled by 1 / (1 - p), else
// zeroed; the backward multiplies by the same mask. The mask is drawn from
// `gen` on the host exactly as PyTorch 1.13's CPU build without MKL draws
// bernoulli_(1 - p) (one Random64 per element, in order: kept when
// (v & (2^53 - 1)) / 2^53 < 1 - p), so a torch.manual_seed(s) script and
// Generator(s) give the same mask on every device. p == 0 or !training
// returns x itself and draws nothing; p == 1 gives zeros (draws nothing,
// as PyTorch). p outside [0, 1] (or NaN) is InvalidArgument.
absl::StatusOr<Tensor> Dropout(const Tensor& x, double p, bool training,
                               Generator& gen);

// The core of causal self-attention, as PyTorch's math (nanoGPT's
// non-flash path): q, k, v [B, H, T, hd] (one float dtype, one device) ->
// [B, H, T, hd]:
//   att = (q @ k^T) * (1 / sqrt(hd)); att[i, j] = -inf for j > i when
//   causal; att = softmax(att, -1); att = dropout(att, dropout_p); att @ v.
// The dropout mask is drawn from *gen as Dropout draws it over a
// [B, H, T, T] tensor (in that order); dropout_p == 0 or gen == nullptr
// draws nothing and drops nothing. q, k and v all get gradients. Memory:
// the [B, H, T, T] probabilities (and the mask when dropping) are kept for
// backward; nothing else of that size. f16/bf16 compute in f32.
// InvalidArgument for shapes that differ or are not 4-d, dropout_p outside
// [0, 1), or dropout_p > 0 without a generator.
absl::StatusOr<Tensor> ScaledDotProductAttention(
    const Tensor& q, const Tensor& k, const Tensor& v, bool causal = true,
    double dropout_p = 0, Generator* gen = nullptr);

// GPT-2's attention core from its fused QKV projection: qkv [B, T, 3C]
// (q, k, v side by side, each C = n_head * hd wide) -> y [B, T, C], the
// heads merged; equal to
//   x = Permute(Reshape(qkv, {B, T, 3, n_head, hd}), {2, 0, 3, 1, 4});
//   q, k, v = x[0], x[1], x[2];
//   y = ScaledDotProductAttention(q, k, v, /*causal=*/true, dropout_p, gen);
//   Reshape(Permute(y, {0, 2, 1, 3}), {B, T, C})
// with the same dropout draws. On CPU f32 with AVX2 + FMA the heads are
// read and written in place (no permuted copies forward or backward; the
// same arithmetic, GEMMs through leading dimensions); elsewhere it is that
// composition. qkv gets the gradient. InvalidArgument when qkv is not
// [B, T, 3C], n_head does not divide C, dropout_p is outside [0, 1), or
// dropout_p > 0 comes without a generator.
absl::StatusOr<Tensor> CausalSelfAttentionQkv(const Tensor& qkv, int64_t n_head,
                                              double dropout_p = 0,
                                              Generator* gen = nullptr);

// ---- In place, never recorded by autograd (optimizers, DDP, zero_grad).
// Same dtype and element count (any shapes); CPU; f32/f64 except Fill
// (AddInPlace also f16/bf16: the sum in float, rounded once).
// dst += alpha * src
absl::Status AddInPlace(const Tensor& dst, const Tensor& src,
                        double alpha = 1.0);
// dst *= factor
absl::Status ScaleInPlace(const Tensor& dst, double factor);
// Every element of dst = value (any dtype).
absl::Status FillInPlace(const Tensor& dst, double value);

}  // namespace tandem

#endif  // TANDEM_TENSOR_OPS_H_
