// tandem::train::SyncBatchNorm and ConvertSyncBatchNorm — BatchNorm2d whose
// training statistics cover the global batch (every rank's samples), after
// PyTorch 1.13's torch.nn.SyncBatchNorm (torch/nn/modules/_functions.py).
//
//   TANDEM_ASSIGN_OR_RETURN(int64_t n, ConvertSyncBatchNorm(*model, comm));
//   // every nn::BatchNorm2d below `model` is now a SyncBatchNorm
//
// Training forward, on every rank (a collective: every rank calls it, in
// the same order as its other collectives):
//   1. one all-gather of each rank's input shape, num_features and dtype
//      (6 int64): ranks whose channel counts, dtypes or shapes do not fit
//      fail together, each naming every rank's shape, instead of
//      mismatching (or hanging in) the statistics' all-gather. Every rank
//      must also hold >= 1 value per channel and the union >= 2.
//   2. per-channel (mean, biased var) of the local batch (BatchNormStatsOf),
//      one all-gather of them, combined with the ranks' counts
//      (BatchNormGatherStats: Chan's parallel variance) into the global mean
//      and invstd; running_mean / running_var move toward them (unbiased
//      global variance) by momentum (or 1 / num_batches_tracked when
//      momentum is nullopt); num_batches_tracked += 1.
//   3. y = (x - mean) * invstd * weight + bias (BatchNormElemt).
// Backward (a node recorded on y): sum(dy) and sum(dy * (x - mean)) per
// channel of the local batch; weight and bias get the LOCAL gradients
// (sum_dy_xmu * invstd, sum_dy), as in PyTorch, so DDP's all-reduce of
// parameter gradients combines them; when x needs a gradient the two sums
// are all-reduced (one collective; every rank's x must then need one) and
// dx uses the global sums and the global count.
//
// Eval mode, and a world of one rank, run exactly nn::BatchNorm2d (no
// collective). Without track_running_stats, eval normalises with the
// LOCAL batch's statistics (as BatchNorm2d, and as PyTorch, which syncs
// only when self.training).
//
// State: the same parameters and buffers, under the same names, as the
// nn::BatchNorm2d it wraps (the very same tensors: an optimizer or DDP
// built before conversion still sees them). Inputs are [N, C, H, W] of the
// module's dtype (f32 or f64; no f16/bf16 in training).
//
// Every wait is bounded by Options::timeout (and by the communicator's
// own); a rank that fails before a collective makes the others fail with
// the communicator's timeout error, not hang.
//
// Thread-safety: as Module (one thread at a time). The communicator must
// outlive the module and every graph its forward recorded.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_SYNC_BATCH_NORM_H_
#define TANDEM_TRAIN_PARALLEL_DDP_SYNC_BATCH_NORM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "tensor/nn/layers/batch_norm.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::train {

// Replaces every nn::BatchNorm2d below `root` (recursively; not `root`
// itself) with a SyncBatchNorm over `comm` that takes over its tensors, so
// the state-dict names, values and tensor identities stay. Returns how many
// were replaced. All or nothing: when a BatchNorm2d's parent does not
// support ReplaceChild (nn::Module::CanReplaceChild) FailedPrecondition
// names that parent's path and type and nothing is replaced; `root` being a
// BatchNorm2d is InvalidArgument (wrap it: SyncBatchNorm::FromBatchNorm).
absl::StatusOr<int64_t> ConvertSyncBatchNorm(
    nn::Module& root, comm::Communicator& comm,
    absl::Duration timeout = absl::Minutes(5));

class SyncBatchNorm : public nn::Module {
 public:
  // A fresh BatchNorm2d(num_features, options), synchronised over `comm`.
  static absl::StatusOr<std::unique_ptr<SyncBatchNorm>> Create(
      int64_t num_features, const nn::BatchNorm2d::Options& options,
      comm::Communicator& comm, absl::Duration timeout = absl::Minutes(5));
  // Takes over `bn` (its tensors, options and mode). Null is an error.
  static absl::StatusOr<std::unique_ptr<SyncBatchNorm>> FromBatchNorm(
      std::unique_ptr<nn::BatchNorm2d> bn, comm::Communicator& comm,
      absl::Duration timeout = absl::Minutes(5));

  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "SyncBatchNorm"; }
  std::string ExtraRepr() const override { return bn_->ExtraRepr(); }

  const nn::BatchNorm2d& batch_norm() const { return *bn_; }

 private:
  friend absl::StatusOr<int64_t> ConvertSyncBatchNorm(nn::Module&,
                                                      comm::Communicator&,
                                                      absl::Duration);
  SyncBatchNorm(comm::Communicator& comm, absl::Duration timeout)
      : comm_(&comm), timeout_(timeout) {}
  // A SyncBatchNorm registering `bn`'s tensors; bn_ is left for the caller
  // to set (the owner of `bn` hands it over after this cannot fail).
  static absl::StatusOr<std::unique_ptr<SyncBatchNorm>> Wrap(
      const nn::BatchNorm2d& bn, comm::Communicator& comm,
      absl::Duration timeout);
  absl::StatusOr<Tensor> SyncForward(const Tensor& x);

  // Not a registered child: its parameters and buffers are registered as
  // this module's own, so the state-dict names do not change.
  std::unique_ptr<nn::BatchNorm2d> bn_;
  comm::Communicator* comm_;
  absl::Duration timeout_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_SYNC_BATCH_NORM_H_
