// The kernel signatures of the ops in tensor/ops.h and tensor/optim, and
// their rows of the kernel table (tensor/dispatch/op_table.h). For kernel
// libraries (tensor/cuda, tensor/sim_device, test fakes), not for users.
//
// Each op's definition (tensor/ops/) checks its arguments once for every
// device (defined, one device, dtypes, shapes; the messages live there),
// then calls the kernel of the inputs' device type with checked arguments:
// dims already normalised, the broadcast plan already made, the outputs
// allocated on that device. A kernel only computes (it may allocate scratch
// of its own) and records no autograd: the definition records the node once
// for every device, and its backward formula calls the backward rows below
// (or forward rows again), whose kernels write a GradOut. Results are in
// the device's stream order: a kernel returns once its work is queued;
// errors found only while the work runs surface at the next synchronising
// call (a copy to the host, Item(), cuda::Synchronize).
//
// A kernel must be safe to call from any thread.
#ifndef TANDEM_TENSOR_DISPATCH_OP_KERNELS_H_
#define TANDEM_TENSOR_DISPATCH_OP_KERNELS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/autograd/autograd.h"
#include "tensor/dispatch/elementwise_op.h"  // IWYU pragma: export
#include "tensor/dispatch/op_table.h"
#include "tensor/ops.h"
#include "tensor/ops/internal.h"
#include "tensor/tensor.h"

namespace tandem {

// "Add", "Sub", ...: the op's name in messages and autograd nodes.
const char* BinaryOpName(BinaryOp op);
// "Neg", "Relu", ..., "AddScalar", ...
const char* UnaryOpName(UnaryOp op);

// One Sgd step on one parameter (tensor/optim/sgd.h has the formula).
struct SgdStepArgs {
  double lr = 0;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  // The momentum buffer is new: set it to the gradient instead of mixing.
  bool first = false;
};

// One AdamW step on one parameter (tensor/optim/adamw.h); the scalars are
// computed on the host in double exactly as the CPU update does.
struct AdamWStepArgs {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double decay = 1;       // 1 - lr * weight_decay
  double step_size = 0;   // lr / (1 - beta1^t)
  double bias2_sqrt = 1;  // sqrt(1 - beta2^t)
  bool amsgrad = false;
  bool maximize = false;
};

// A gradient a backward kernel writes: the buffer autograd hands out
// (GradSink::GetBuffer), with the input's shape, dtype and device. When
// `accumulate` is set it holds earlier contributions and the kernel ADDS
// (gemm beta = 1); otherwise the kernel overwrites every element. An
// undefined tensor means that gradient is not wanted.
using GradOut = GradSink::Buffer;

// ---- Signatures. Same contracts as the ops of tensor/ops.h, on checked
// arguments (see each op's definition for what it checked).
// ---- MatMul and Linear (tensor/ops/matmul.cc defines them; CUDA's kernels
// are in tensor/cuda/ops/matmul.cc). c [m, n] = op(a) op(b), written or
// (c.accumulate) added to, op transposing where its flag is set: MatMul's
// forward (c allocated by the definition) and every GEMM of MatMul's and
// Linear's backward (c a gradient buffer). f32/f64, and f16/bf16 where the
// device has them natively.
using MatMulKernel = absl::Status(const Tensor& a, const Tensor& b,
                                  bool transpose_a, bool transpose_b,
                                  const GradOut& c);
// y [batch, out] = x [batch, in] weight^T + bias (bias [out] or undefined);
// y allocated by the definition.
using LinearKernel = absl::Status(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias, const Tensor& y);
// out [cols] = (or +=) the column sums of g [rows, cols]: Linear's bias
// gradient.
using ColumnSumsKernel = absl::Status(const Tensor& g, const GradOut& out);
// ---- Elementwise (tensor/ops/elementwise.cc defines them; CUDA's kernels
// are in tensor/cuda/ops/elementwise.cc). out (plan.out_shape) = a op b,
// allocated by the definition.
using BinaryKernel = absl::Status(BinaryOp op, const Tensor& a, const Tensor& b,
                                  const internal::BroadcastPlan& plan,
                                  const Tensor& out);
// The gradient of operand `input` (0: a, 1: b) given g (out's shape),
// summed over the positions a broadcast operand was repeated at. a and b
// are defined where the formula reads them (Mul, Div), else undefined.
using BinaryBackwardKernel = absl::Status(BinaryOp op, int input,
                                          const Tensor& a, const Tensor& b,
                                          const Tensor& g,
                                          const internal::BroadcastPlan& plan,
                                          const GradOut& out);
// y = op(x), allocated by the definition; `scalar` is used by the k*Scalar
// kinds only.
using UnaryKernel = absl::Status(UnaryOp op, const Tensor& x, double scalar,
                                 const Tensor& y);
// gx = op'(x, y) * g. x is defined for Relu and Log, y for Sigmoid, Tanh
// and Exp (what the derivative reads); the others are undefined.
using UnaryBackwardKernel = absl::Status(UnaryOp op, double scalar,
                                         const Tensor& x, const Tensor& y,
                                         const Tensor& g, const GradOut& out);
// ---- Reductions and Softmax (tensor/ops/reduce.cc defines them; CUDA's
// kernels are in tensor/cuda/ops/reduce.cc). `dim` is normalised to
// [0, ndim); outputs are allocated by the definition.
// y = softmax (or log_softmax when `log`) of x along dim.
using SoftmaxKernel = absl::Status(const Tensor& x, int64_t dim, bool log,
                                   const Tensor& y);
// The gradient from the forward's output y: softmax: y (g - sum(g y)); log:
// g - e^y sum(g).
using SoftmaxBackwardKernel = absl::Status(const Tensor& g, const Tensor& y,
                                           int64_t dim, bool log,
                                           const GradOut& out);
// out (0-d) = the sum over all elements, in double; mean divides by numel.
using SumAllKernel = absl::Status(const Tensor& x, bool mean,
                                  const Tensor& out);
// Every element of out = g (0-d), over numel when mean.
using SumAllBackwardKernel = absl::Status(const Tensor& g, bool mean,
                                          const GradOut& out);
// out = the sums along dim (x's shape without it, or with 1 there: one
// layout); mean divides by its size.
using SumDimKernel = absl::Status(const Tensor& x, int64_t dim, bool mean,
                                  const Tensor& out);
// out (x's shape) = g repeated along dim, over its size when mean.
using SumDimBackwardKernel = absl::Status(const Tensor& g, int64_t dim,
                                          bool mean, const GradOut& out);
// out (i64, x's shape without dim) = the index of the first maximum along
// dim (x.dim(dim) > 0); any dtype.
using ArgmaxKernel = absl::Status(const Tensor& x, int64_t dim,
                                  const Tensor& out);
// ---- Conv2d (tensor/ops/conv.cc defines it; CUDA's kernels are in
// tensor/cuda/ops/conv.cc). x [N, C, H, W], weight [O, C, kh, kw], bias [O]
// or undefined; the definition checked them and allocated y [N, O, oh, ow].
using Conv2dKernel = absl::Status(const Tensor& x, const Tensor& weight,
                                  const Tensor& bias,
                                  const Conv2dOptions& options,
                                  const Tensor& y);
// The gradients of the forward above given g (y's shape): each wanted one
// (a defined GradOut) is written, or added to when it accumulates.
using Conv2dBackwardKernel = absl::Status(const Tensor& g, const Tensor& x,
                                          const Tensor& weight,
                                          const Conv2dOptions& options,
                                          const GradOut& gx,
                                          const GradOut& gweight,
                                          const GradOut& gbias);
// ---- Pooling (tensor/ops/pool.cc). One geometry for the three pools;
// the op's definition resolved defaults and output sizes.
enum class PoolMode : int8_t { kMax, kAvg, kAdaptiveAvg };
struct Pool2dArgs {
  PoolMode mode = PoolMode::kMax;
  // kMax and kAvg: window (oh * stride - pad) + [0, kernel), clipped to
  // the input (kAvg's divisor: clipped to the padded input when
  // count_include_pad). kAdaptiveAvg uses none of these.
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  bool count_include_pad = true;
};
// x [N, C, H, W] -> y [N, C, oh, ow], both allocated by the definition;
// argmax (i64, y's shape: index in the H*W plane) is defined for kMax only.
using Pool2dKernel = absl::Status(const Tensor& x, const Tensor& y,
                                  const Tensor& argmax, const Pool2dArgs& args);
// gx [N, C, H, W] = the gradient of y given g (y's shape); gx is allocated
// and every element is written. argmax as the forward's (kMax only).
using Pool2dBackwardKernel = absl::Status(const Tensor& g, const Tensor& argmax,
                                          const Tensor& gx,
                                          const Pool2dArgs& args);
// ---- Losses (tensor/ops/loss.cc defines them; CUDA's kernels are in
// tensor/cuda/ops/loss.cc). CrossEntropy: logits [N, C], labels [N] (i64);
// labels equal to options.ignore_index are skipped, the others are checked
// against [0, C) by the kernel, where they are read
// (internal::LabelOutOfRange). The definition allocated the 0-d loss and
// `saved` ([N, C], logits' dtype), which the kernel fills with what its
// device's backward kernel reads (the definition only keeps it); *counted
// <- the number of rows not ignored.
using CrossEntropyKernel = absl::Status(const Tensor& logits,
                                        const Tensor& labels,
                                        const CrossEntropyOptions& options,
                                        const Tensor& loss, const Tensor& saved,
                                        int64_t* counted);
// The gradient of the loss w.r.t. the logits given g (0-d).
using CrossEntropyBackwardKernel =
    absl::Status(const Tensor& g, const Tensor& saved, const Tensor& labels,
                 const CrossEntropyOptions& options, int64_t counted,
                 const GradOut& glogits);
// Mse: loss (0-d, allocated) = mean of (prediction - target)^2, summed in
// double.
using MseKernel = absl::Status(const Tensor& prediction, const Tensor& target,
                               const Tensor& loss);
// The gradient w.r.t. the prediction, 2 (p - t) / n * g, or its negation
// (the target's) when `negate`.
using MseBackwardKernel = absl::Status(const Tensor& g,
                                       const Tensor& prediction,
                                       const Tensor& target, bool negate,
                                       const GradOut& out);
// In place, never recorded.
using AddInPlaceKernel = absl::Status(const Tensor& dst, const Tensor& src,
                                      double alpha);
using ScaleInPlaceKernel = absl::Status(const Tensor& dst, double factor);
using FillInPlaceKernel = absl::Status(const Tensor& dst, double value);
// dst = src converted elementwise (tensor/convert.h's rules); same element
// count, both on one device, any dtypes. Not recorded.
using ConvertKernel = absl::Status(const Tensor& src, const Tensor& dst);
// Optimizer updates, in place on the parameter and its state. `buffer`
// (Sgd, may be undefined without momentum) and `max_exp_avg_sq` (AdamW,
// undefined without amsgrad) have the parameter's shape and dtype.
using SgdStepKernel = absl::Status(const Tensor& param, const Tensor& grad,
                                   const Tensor& buffer,
                                   const SgdStepArgs& args);
using AdamWStepKernel = absl::Status(const Tensor& param, const Tensor& grad,
                                     const Tensor& exp_avg,
                                     const Tensor& exp_avg_sq,
                                     const Tensor& max_exp_avg_sq,
                                     const AdamWStepArgs& args);

// ---- BatchNorm's kernels (tensor/ops/batch_norm.cc defines the op and
// its pieces, tensor/ops/batch_norm.h; the CUDA kernels are in
// tensor/cuda/ops/batch_norm.cc). Each is one of PyTorch's SyncBatchNorm
// pieces (batch_norm_stats, batch_norm_gather_stats_with_counts,
// batch_norm_elemt, batch_norm_backward_reduce, batch_norm_backward_elemt).
// x and dy are [N, C, *] (contiguous, at least 2-d); the per-channel
// tensors are [C]; every floating tensor has x's dtype (f32 or f64), and
// sums are accumulated in double. Outputs are allocated by the caller.
//
// mean, var <- the batch mean and biased variance of each channel (count
// N * prod(*) >= 1).
using BatchNormStatsKernel = absl::Status(const Tensor& x, const Tensor& mean,
                                          const Tensor& var);
// Combines G groups' statistics (means, vars [G, C], biased; counts [G],
// each >= 1, total >= 2) into mean and invstd = 1 / sqrt(var + eps) of the
// union, and, when running_mean / running_var are defined, updates them in
// place: r = (1 - momentum) r + momentum * s, with the unbiased variance.
using BatchNormGatherStatsKernel = absl::Status(
    const Tensor& means, const Tensor& vars, const Tensor& counts,
    const Tensor& running_mean, const Tensor& running_var, double momentum,
    double eps, const Tensor& mean, const Tensor& invstd);
// out = (x - mean) * invstd * weight + bias, computed as x * a + b with
// a = invstd * weight, b = bias - mean * a per channel (PyTorch's CPU
// form); weight and bias may be undefined (1 and 0).
using BatchNormElemtKernel = absl::Status(const Tensor& out, const Tensor& x,
                                          const Tensor& weight,
                                          const Tensor& bias,
                                          const Tensor& mean,
                                          const Tensor& invstd);
// sum_dy <- sum of dy, sum_dy_xmu <- sum of dy * (x - mean), per channel.
using BatchNormBackwardReduceKernel = absl::Status(const Tensor& dy,
                                                   const Tensor& x,
                                                   const Tensor& mean,
                                                   const Tensor& sum_dy,
                                                   const Tensor& sum_dy_xmu);
// dx = (dy - sum_dy / count - (x - mean) * invstd^2 * sum_dy_xmu / count)
//      * invstd * weight
// (batch statistics), or dx = dy * invstd * weight when sum_dy and
// sum_dy_xmu are undefined (running statistics: eval mode). weight may be
// undefined (1).
using BatchNormBackwardElemtKernel =
    absl::Status(const Tensor& dx, const Tensor& dy, const Tensor& x,
                 const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                 const Tensor& sum_dy, const Tensor& sum_dy_xmu, double count);
// BatchNormInvstd is a PointwiseKernel (tensor/dispatch/op_table.h): out = 1 /
// sqrt(in[0] + attr), attr = eps, in the tensor's dtype (eval mode's
// invstd from running_var, as PyTorch computes it).
// ---- End of BatchNorm's signatures.

// ---- LayerNorm's kernels (tensor/ops/layer_norm.cc defines the op; the
// CUDA kernels are in tensor/cuda/ops/layer_norm.cc). x is walked as
// [rows, cols] (cols >= 1: the normalised trailing dims' size; rows may be
// 0); mean and rstd are
// [rows], weight, bias, dweight and dbias [cols] (flattened); every tensor
// has x's dtype (f32 or f64). Sums are accumulated in double.
//
// y = (x - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(biased
// var + eps); weight and bias may be undefined (1 and 0).
using LayerNormKernel = absl::Status(const Tensor& x, const Tensor& weight,
                                     const Tensor& bias, int64_t cols,
                                     double eps, const Tensor& y,
                                     const Tensor& mean, const Tensor& rstd);
// The gradients of the forward above: each of dx, dweight, dbias is
// written when defined (overwritten, not accumulated). weight may be
// undefined (1).
using LayerNormBackwardKernel =
    absl::Status(const Tensor& dy, const Tensor& x, const Tensor& mean,
                 const Tensor& rstd, const Tensor& weight, int64_t cols,
                 const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
// ---- End of LayerNorm's signatures.

// ---- Rows: one accessor per op (TANDEM_OP_ROW, tensor/dispatch/op_table.h).
TANDEM_OP_ROW(MatMulKernels, MatMulKernel, "MatMul")
TANDEM_OP_ROW(LinearKernels, LinearKernel, "Linear")
TANDEM_OP_ROW(ColumnSumsKernels, ColumnSumsKernel, "ColumnSums")
TANDEM_OP_ROW(BinaryKernels, BinaryKernel, "Binary")
TANDEM_OP_ROW(BinaryBackwardKernels, BinaryBackwardKernel, "BinaryBackward")
TANDEM_OP_ROW(UnaryKernels, UnaryKernel, "Unary")
TANDEM_OP_ROW(UnaryBackwardKernels, UnaryBackwardKernel, "UnaryBackward")
TANDEM_OP_ROW(SoftmaxKernels, SoftmaxKernel, "Softmax")
TANDEM_OP_ROW(SoftmaxBackwardKernels, SoftmaxBackwardKernel, "SoftmaxBackward")
TANDEM_OP_ROW(SumAllKernels, SumAllKernel, "SumAll")
TANDEM_OP_ROW(SumAllBackwardKernels, SumAllBackwardKernel, "SumAllBackward")
TANDEM_OP_ROW(SumDimKernels, SumDimKernel, "SumDim")
TANDEM_OP_ROW(SumDimBackwardKernels, SumDimBackwardKernel, "SumDimBackward")
TANDEM_OP_ROW(ArgmaxKernels, ArgmaxKernel, "Argmax")
TANDEM_OP_ROW(Conv2dKernels, Conv2dKernel, "Conv2d")
TANDEM_OP_ROW(Conv2dBackwardKernels, Conv2dBackwardKernel, "Conv2dBackward")
TANDEM_OP_ROW(Pool2dKernels, Pool2dKernel, "Pool2d")
TANDEM_OP_ROW(Pool2dBackwardKernels, Pool2dBackwardKernel, "Pool2dBackward")
TANDEM_OP_ROW(CrossEntropyKernels, CrossEntropyKernel, "CrossEntropy")
TANDEM_OP_ROW(CrossEntropyBackwardKernels, CrossEntropyBackwardKernel,
              "CrossEntropyBackward")
TANDEM_OP_ROW(MseKernels, MseKernel, "Mse")
TANDEM_OP_ROW(MseBackwardKernels, MseBackwardKernel, "MseBackward")
TANDEM_OP_ROW(AddInPlaceKernels, AddInPlaceKernel, "AddInPlace")
TANDEM_OP_ROW(ScaleInPlaceKernels, ScaleInPlaceKernel, "ScaleInPlace")
TANDEM_OP_ROW(FillInPlaceKernels, FillInPlaceKernel, "FillInPlace")
TANDEM_OP_ROW(ConvertKernels, ConvertKernel, "Convert")
TANDEM_OP_ROW(SgdStepKernels, SgdStepKernel, "SgdStep")
TANDEM_OP_ROW(AdamWStepKernels, AdamWStepKernel, "AdamWStep")
// ---- BatchNorm's rows.
TANDEM_OP_ROW(BatchNormStatsKernels, BatchNormStatsKernel, "BatchNormStats")
TANDEM_OP_ROW(BatchNormGatherStatsKernels, BatchNormGatherStatsKernel,
              "BatchNormGatherStats")
TANDEM_OP_ROW(BatchNormElemtKernels, BatchNormElemtKernel, "BatchNormElemt")
TANDEM_OP_ROW(BatchNormBackwardReduceKernels, BatchNormBackwardReduceKernel,
              "BatchNormBackwardReduce")
TANDEM_OP_ROW(BatchNormBackwardElemtKernels, BatchNormBackwardElemtKernel,
              "BatchNormBackwardElemt")
TANDEM_OP_ROW(BatchNormInvstdKernels, PointwiseKernel, "BatchNormInvstd")
// ---- End of BatchNorm's rows.
// ---- LayerNorm's rows.
TANDEM_OP_ROW(LayerNormKernels, LayerNormKernel, "LayerNorm")
TANDEM_OP_ROW(LayerNormBackwardKernels, LayerNormBackwardKernel,
              "LayerNormBackward")
// ---- End of LayerNorm's rows.
// ---- Gelu's rows (PointwiseKernel): forward, inputs {x}; backward, inputs
// {g, x}. attr is 1 for the tanh approximation, 0 for the exact form.
TANDEM_OP_ROW(GeluKernels, PointwiseKernel, "Gelu")
TANDEM_OP_ROW(GeluBackwardKernels, PointwiseKernel, "GeluBackward")
// ---- Embedding's rows (PointwiseKernel). Forward: out [n, D], inputs
// {indices [n] (i64 or i32), weight [V, D]}. Backward: out [V, D]
// zero-filled by the definition, inputs {g [n, D], indices}; the kernel adds
// row i of g into row indices[i] of out for i = 0, 1, ..., n - 1 in that
// order. attr unused.
TANDEM_OP_ROW(EmbeddingKernels, PointwiseKernel, "Embedding")
TANDEM_OP_ROW(EmbeddingBackwardKernels, PointwiseKernel, "EmbeddingBackward")

}  // namespace tandem

#endif  // TANDEM_TENSOR_DISPATCH_OP_KERNELS_H_
