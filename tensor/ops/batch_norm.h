// BatchNorm's per-channel pieces, PyTorch's SyncBatchNorm building blocks
// (torch/nn/modules/_functions.py): what BatchNorm (tensor/ops.h) runs on
// one process, exposed so that a synchronised BatchNorm can put collectives
// between them:
//
//   forward:  stats = BatchNormStatsOf(x)                  // batch_norm_stats
//             all-gather (stats.mean, stats.var, count) -> [G, C], [G]
//             s = BatchNormGatherStats(means, vars, counts, running_mean,
//                   running_var, momentum, eps)            // ..._with_counts
//             y = BatchNormElemt(x, weight, bias, s.mean, s.invstd)
//   backward: r = BatchNormBackwardReduce(dy, x, s.mean)  // sum_dy, sum_dy_xmu
//             grad_weight = r.sum_dy_xmu * s.invstd, grad_bias = r.sum_dy
//             all-reduce (r.sum_dy, r.sum_dy_xmu)
//             dx = BatchNormBackwardElemt(dy, x, s.mean, s.invstd, weight,
//                   r.sum_dy, r.sum_dy_xmu, total_count)
//
// One difference from PyTorch: the statistics travel as (mean, biased
// variance) rather than (mean, invstd), so no variance is recovered from
// an inverse square root.
//
// Every piece checks its arguments (one device; f32 or f64; x and dy
// [N, C, *]; per-channel tensors [C], or [G, C]; one dtype throughout),
// runs the kernel of that device (tensor/dispatch/op_kernels.h) and records no
// autograd. Sums are accumulated in double. Results are in the device's
// stream order. Thread-safe (they touch only their arguments).
#ifndef TANDEM_TENSOR_OPS_BATCH_NORM_H_
#define TANDEM_TENSOR_OPS_BATCH_NORM_H_

#include "absl/status/statusor.h"
#include "tensor/tensor.h"

namespace tandem {

// The batch mean and biased variance of each channel of x [N, C, *]: [C]
// each. InvalidArgument when a channel has no values (N * prod(*) == 0).
struct BatchNormStats {
  Tensor mean;
  Tensor var;
};
absl::StatusOr<BatchNormStats> BatchNormStatsOf(const Tensor& x);

// The statistics of G groups (means, vars [G, C], biased; counts [G])
// combined (Chan et al.'s parallel variance, group by group; one group
// comes back unchanged) into the union's mean and invstd = 1 / sqrt(var +
// eps), [C] each; running_mean and running_var ([C], both or neither)
// updated in place with `momentum` and the unbiased variance. The counts
// are values on the device and not checked here: each must be >= 1 and
// their total >= 2 (the caller knows them; BatchNorm checks its own), or
// the results are inf or NaN.
struct BatchNormSaved {
  Tensor mean;
  Tensor invstd;
};
absl::StatusOr<BatchNormSaved> BatchNormGatherStats(
    const Tensor& means, const Tensor& vars, const Tensor& counts,
    const Tensor& running_mean, const Tensor& running_var, double momentum,
    double eps);

// (x - mean) * invstd * weight + bias per channel; weight, bias may be
// undefined.
absl::StatusOr<Tensor> BatchNormElemt(const Tensor& x, const Tensor& weight,
                                      const Tensor& bias, const Tensor& mean,
                                      const Tensor& invstd);

// sum(dy) and sum(dy * (x - mean)) per channel, [C] each.
struct BatchNormGradSums {
  Tensor sum_dy;
  Tensor sum_dy_xmu;
};
absl::StatusOr<BatchNormGradSums> BatchNormBackwardReduce(const Tensor& dy,
                                                          const Tensor& x,
                                                          const Tensor& mean);

// dL/dx of y = BatchNormElemt(x, weight, ., mean, invstd) where mean and
// invstd are the statistics of `count` values including x:
//   (dy - sum_dy / count - (x - mean) invstd^2 sum_dy_xmu / count)
//   * invstd * weight.
// With sum_dy and sum_dy_xmu undefined, mean and invstd are constants
// (running statistics, eval mode): dy * invstd * weight. weight may be
// undefined.
absl::StatusOr<Tensor> BatchNormBackwardElemt(
    const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
    const Tensor& weight, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
    double count);

}  // namespace tandem

#endif  // TANDEM_TENSOR_OPS_BATCH_NORM_H_
