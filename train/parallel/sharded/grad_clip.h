// Gradient clipping when each rank holds a shard of the gradients (ZeRO-1/2,
// FSDP): FullyShardedDataParallel.clip_grad_norm_'s scheme on top of
// optim::ClipGradNorm's pieces (tensor/optim/clip_grad.h).
//
// Each rank measures its part of the norm (sum |g|^p over its shard, or its
// max |g| for p = infinity), one all-reduce of that one value (Sum, or Max)
// gives every rank the same total, and every rank scales its shard by the
// same clip_coef. Shards must be disjoint and cover every gradient once
// (padding elements hold 0, which adds nothing), so the total equals the
// norm of the unsharded gradients up to the order of the sum.
//
// Per mode:
//   DDP: the gradients after Backward are averaged and identical on every
//        rank: optim::ClipGradNorm(model.Parameters(), ...) locally (no
//        collective) is right and gives the same result on every rank.
//   ZeRO-1/2: ZeroRedundancyOptimizer::ClipGradNorm, between DDP's
//        Backward and zero->Step().
//   FSDP: FullyShardedDataParallel::ClipGradNorm, between Backward and the
//        shards' optimizer step.
// Under AMP call GradScaler::Unscale(optimizer) first (the shards'
// optimizer), then the clip, then GradScaler::Step.
//
// Collective: every rank calls it at the same point, with the same
// max_norm and options. Bounded by `timeout` and the communicator's own.
#ifndef TANDEM_TRAIN_PARALLEL_SHARDED_GRAD_CLIP_H_
#define TANDEM_TRAIN_PARALLEL_SHARDED_GRAD_CLIP_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/optim/clip_grad.h"
#include "tensor/tensor.h"

namespace tandem::train {

// `shard_grads`: this rank's gradient shards (may be empty on a rank that
// owns no element; it still takes part). `device`: where this rank trains
// (the all-reduce is staged there, train/parallel/core/staged_all_gather.h).
// Returns the total norm, the same on every rank. Errors: optim's argument
// checks (before any communication, the same on every rank), a failed
// all-reduce, and with error_if_nonfinite a non-finite total (on every
// rank; nothing scaled).
absl::StatusOr<double> ClipShardedGradNorm(
    comm::Communicator& comm, Device device,
    const std::vector<Tensor>& shard_grads, double max_norm,
    const optim::ClipGradNormOptions& options = {},
    absl::Duration timeout = absl::Minutes(30));

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_SHARDED_GRAD_CLIP_H_
