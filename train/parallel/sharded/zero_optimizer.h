// ZeroRedundancyOptimizer: ZeRO stages 1 and 2 on top of
// DistributedDataParallel, after torch.distributed.optim.
// ZeroRedundancyOptimizer and DeepSpeed's ZeRO. Each rank keeps optimizer
// state (momentum, Adam's moments) for 1/N of the parameters only, steps that
// shard, and all-gathers the updated shards so every rank ends the step with
// the full, identical parameters.
//
//   TANDEM_ASSIGN_OR_RETURN(auto ddp,
//                           DistributedDataParallel::Create(*model, comm));
//   TANDEM_ASSIGN_OR_RETURN(
//       auto zero, ZeroRedundancyOptimizer::Create(
//                      *ddp, [](std::vector<Tensor> shard)
//                          -> absl::StatusOr<std::unique_ptr<optim::Optimizer>>
//                          {
//                        TANDEM_ASSIGN_OR_RETURN(auto adam,
//                                                optim::AdamW::Create(shard));
//                        return
//                        std::make_unique<optim::AdamW>(std::move(adam));
//                      }));
//   for (...) {  // the same steps on every rank
//     zero->ZeroGrad();
//     TANDEM_ASSIGN_OR_RETURN(Tensor out, ddp->Forward(x));
//     ... loss ...
//     TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
//     TANDEM_RETURN_IF_ERROR(zero->Step());  // collective
//   }
//
// Partition: a flat, equal split of each of DDP's gradient buckets (not
// PyTorch's greedy assignment of whole parameters): each bucket is a
// FlatParamGroup (flat_param.h) and rank r owns its Shard(r, N). Bucket b of
// n_b elements is padded to N * s_b with s_b = ceil(n_b / N), and rank r owns
// elements [r * s_b, (r + 1) * s_b). Why: every rank holds the same state to
// within one element per bucket whatever the parameter shapes (the greedy split
// leaves a rank with a whole large matrix), which is what the ZeRO memory
// formulas assume; one all-gather per bucket brings the parameters back; and
// the same shards are what a reduce-scatter of the bucket delivers (stage 2).
// Sgd and AdamW are elementwise, so stepping a flat slice gives the same bits
// as stepping the whole parameters; optimizers that need a whole tensor
// (norms per parameter) must not be used with this split.
//
// Stage: 1 when DDP all-reduces gradients (every rank holds every averaged
// gradient, and reads only its shard); 2 with
// ZeroOptions::reduce_scatter_gradients (Create switches DDP to
// reduce-scattering its buckets: DistributedDataParallel::
// ReduceScatterGradients; each rank receives only its shard's average).
// At stage 2 the shards
// have gradient buffers of their own: Step copies this rank's slice of each
// bucket into them, then frees DDP's full-size buckets (Storage::Free) and
// clears the module parameters' gradients, so between steps a rank holds
// the parameters, 1/N of the gradients and 1/N of the optimizer state
// (DDP's next Forward reallocates the buckets for backward).
//
// Contract:
//   - Collective: Create (none at world size 1) and Step issue the same
//     collectives on every rank; every rank calls them in the same order.
//   - Create makes each parameter of the module a view of one flat, padded
//     parameter buffer per bucket (the bucket's group: Pack, BindParams), so
//     the all-gather lands in the parameters themselves: no second copy of the
//     model. The module must not be moved (Module::To) while wrapped.
//   - The local optimizer (`make_optimizer` builds it) sees only this
//     rank's shard tensors: views of the flat buffer whose gradients are
//     views of DDP's buckets. A rank whose shards are all empty (more ranks
//     than elements) has no local optimizer and only takes part in the
//     all-gathers.
//   - Ownership: `ddp` (and its module and communicator) must outlive the
//     optimizer; the flat buffers outlive it through the parameters.
//   - Blocking: Step blocks until every bucket's all-gather is done, bounded
//     by ZeroOptions::timeout.
//   - Thread-safety: belongs to its rank's thread, like the DDP wrapper.
#ifndef TANDEM_TRAIN_PARALLEL_SHARDED_ZERO_OPTIMIZER_H_
#define TANDEM_TRAIN_PARALLEL_SHARDED_ZERO_OPTIMIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tensor/optim/clip_grad.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/sharded/sharded_optimizer_state.h"

namespace tandem::train {

// Builds the optimizer of one rank's shards (e.g. optim::Sgd::Create).
using ShardOptimizerFactory =
    std::function<absl::StatusOr<std::unique_ptr<optim::Optimizer>>(
        std::vector<Tensor> shards)>;

struct ZeroOptions {
  // Bound of Step's wait on the all-gathers. Must be positive.
  absl::Duration timeout = absl::Minutes(30);
  // ZeRO stage 2: DDP reduce-scatters each bucket instead of all-reducing
  // it (see the header comment and DistributedDataParallel::
  // ReduceScatterGradients). Not with a compressing DDP comm_hook
  // (InvalidArgument at Create). False: stage 1.
  bool reduce_scatter_gradients = false;
};

class ZeroRedundancyOptimizer {
 public:
  // Errors: a null factory or bad options (InvalidArgument), a factory
  // error (returned with the rank), a module whose parameters are no longer
  // the ones DDP bucketed (FailedPrecondition: the module changed after DDP
  // wrapped it), DDP in a step (FailedPrecondition, stage 2).
  static absl::StatusOr<std::unique_ptr<ZeroRedundancyOptimizer>> Create(
      DistributedDataParallel& ddp, const ShardOptimizerFactory& make_optimizer,
      const ZeroOptions& options = {});

  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  // Steps this rank's shards with the local optimizer, then all-gathers
  // every bucket's shards into the parameters. Call it after
  // DDP's Backward (FinishGradientSync) returned OK.
  absl::Status Step();

  // Zeroes every gradient in place (DDP's buckets stay bound).
  void ZeroGrad();

  // Stage 2: copies this rank's averaged gradient slices out of DDP's
  // buckets into the local optimizer's gradients and frees the buckets (what
  // Step does first; once per step). Call it before touching
  // local_optimizer()'s gradients between DDP's Backward and Step, e.g.
  // GradScaler::Unscale(*local_optimizer()). Stage 1: nothing to do (the
  // gradients are views of the buckets). FailedPrecondition when the
  // buckets were already taken without a DDP step since.
  absl::Status TakeShardGradients();

  // Gradient clipping (torch.nn.utils.clip_grad_norm_ over the whole model,
  // computed on the shards: grad_clip.h, one all-reduce of one value).
  // Scales the gradients Step will apply (this rank's averaged shard: at
  // stage 1 its slices of DDP's buckets; at stage 2 the local optimizer's
  // own gradients, after TakeShardGradients) by the clip coefficient of
  // the whole model's norm, and returns that norm before clipping, the
  // same on every rank. Collective; call it after DDP's Backward and before
  // Step. Under AMP (with FoundInfAcrossRanks as the scaler's combiner):
  // TakeShardGradients, scaler.Unscale(*local_optimizer()), ClipGradNorm,
  // then Step unless scaler.found_inf() (Step runs the local step itself,
  // so GradScaler::Step does not fit), then scaler.Update(). At stage 1 the
  // rest of each bucket (the other ranks' shards, which this rank does not
  // step) stays unclipped.
  absl::StatusOr<double> ClipGradNorm(
      double max_norm, const optim::ClipGradNormOptions& options = {});

  // 1 or 2 (see the header comment).
  int stage() const { return stage_; }
  // This rank's optimizer, for set_lr and state inspection; null when this
  // rank owns no element.
  optim::Optimizer* local_optimizer() const { return optimizer_.get(); }
  // Elements this rank's optimizer steps (sum over buckets).
  int64_t shard_numel() const { return shard_numel_; }
  // The flat parameter buffers (padded), one per DDP bucket.
  const std::vector<Tensor>& flat_parameters() const { return flats_; }
  // How the local optimizer's tensors map onto the module's parameters
  // (one entry per bucket), for GatherFullOptimizerState /
  // LoadFullOptimizerState (sharded_optimizer_state.h): checkpoints hold
  // the state an unsharded optimizer of the module would.
  const std::vector<FlatShard>& shard_layout() const { return layout_; }

 private:
  ZeroRedundancyOptimizer(DistributedDataParallel& ddp,
                          const ZeroOptions& options);
  // FailedPrecondition when a bucket member is no longer the module's
  // parameter at its index.
  absl::Status CheckModuleUnchanged() const;
  absl::Status Build(const ShardOptimizerFactory& make_optimizer);

  DistributedDataParallel* ddp_;
  ZeroOptions options_;
  int rank_;
  int world_size_;
  int stage_;
  std::vector<Tensor> flats_;         // per bucket, N * shard_sizes_[b]
  std::vector<int64_t> shard_sizes_;  // per bucket, s_b
  std::vector<Tensor> shards_;        // this rank's non-empty slices
  // Stage 2: per entry of shards_, its bucket's slice (the shard's own
  // gradient is a separate buffer).
  std::vector<Tensor> bucket_slices_;
  // Stage 2: this step's slices were taken (TakeShardGradients).
  bool taken_ = false;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::vector<FlatShard> layout_;
  int64_t shard_numel_ = 0;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_SHARDED_ZERO_OPTIMIZER_H_
