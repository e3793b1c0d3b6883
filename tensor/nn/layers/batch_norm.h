// tandem::nn::BatchNorm2d — batch normalisation over NCHW input, after
// torch.nn.BatchNorm2d (PyTorch 1.13 semantics).
//
//   TANDEM_ASSIGN_OR_RETURN(auto bn, tandem::nn::BatchNorm2d::Create(16));
//   TANDEM_ASSIGN_OR_RETURN(tandem::Tensor y, bn->Forward(x));  // [N, 16, H,
//   W]
//
// State, in PyTorch's state_dict order and names: parameters "weight"
// (ones) and "bias" (zeros), [C], without Options::affine absent; buffers
// "running_mean" (zeros), "running_var" (ones), [C], and
// "num_batches_tracked" (i64 0-d, 0), without track_running_stats absent.
//
// Training (is_training()) and tracking: num_batches_tracked += 1; the
// batch's statistics (biased variance over N, H, W) normalise x, and the
// running statistics move toward them (unbiased variance) by `momentum`,
// or by 1 / num_batches_tracked when momentum is nullopt (a cumulative
// moving average). Eval: the running statistics normalise x, and nothing
// changes. Without track_running_stats there are no buffers and the
// batch's statistics are used in both modes. A training batch with one
// value per channel (N * H * W == 1) is an error naming its shape, and then
// nothing changes (PyTorch has already counted the batch when it raises).
//
// Gradients reach x, weight and bias (tandem::BatchNorm, tensor/ops.h).
// Buffers follow Module::To; the running statistics are updated on their
// device, num_batches_tracked through the host (one scalar read per
// training forward).
//
// Thread-safety: as Module (one thread at a time).
#ifndef TANDEM_TENSOR_NN_LAYERS_BATCH_NORM_H_
#define TANDEM_TENSOR_NN_LAYERS_BATCH_NORM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::nn {

class BatchNorm2d : public Module {
 public:
  struct Options {
    double eps = 1e-5;
    // nullopt = cumulative moving average (PyTorch momentum=None).
    std::optional<double> momentum = 0.1;
    bool affine = true;
    bool track_running_stats = true;
    DType dtype = DType::kF32;  // f32 or f64
  };

  // Errors: num_features < 1, eps negative or not finite, momentum not
  // finite, dtype not f32/f64.
  static absl::StatusOr<std::unique_ptr<BatchNorm2d>> Create(
      int64_t num_features, const Options& options);
  static absl::StatusOr<std::unique_ptr<BatchNorm2d>> Create(
      int64_t num_features);

  // x [N, C, H, W] with C == num_features; f32/f64 of the module's dtype
  // (or f16/bf16 with an f32 module: computed in f32, output in x's dtype).
  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "BatchNorm2d"; }
  // "4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True"
  std::string ExtraRepr() const override;

  int64_t num_features() const { return num_features_; }
  const Options& options() const { return options_; }
  const Tensor& weight() const { return weight_; }  // undefined without affine
  const Tensor& bias() const { return bias_; }
  // Undefined without track_running_stats.
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  const Tensor& num_batches_tracked() const { return num_batches_tracked_; }

  // The running-statistics update of one training batch, shared with
  // SyncBatchNorm: PyTorch's exponential_average_factor (momentum, or
  // 1 / batches when momentum is None) and the count the batch makes.
  struct RunningUpdate {
    double factor = 0;
    int64_t batches = 0;
  };
  // Reads num_batches_tracked (a host read). Only with track_running_stats.
  absl::StatusOr<RunningUpdate> NextRunningUpdate() const;
  // Counts the batch; call once the statistics were updated, so that a
  // failed batch is not counted.
  absl::Status CountBatch(const RunningUpdate& update);

 private:
  BatchNorm2d(int64_t num_features, const Options& options)
      : num_features_(num_features), options_(options) {}

  int64_t num_features_;
  Options options_;
  Tensor weight_;
  Tensor bias_;
  Tensor running_mean_;
  Tensor running_var_;
  Tensor num_batches_tracked_;
};

}  // namespace tandem::nn

#endif  // TANDEM_TENSOR_NN_LAYERS_BATCH_NORM_H_
