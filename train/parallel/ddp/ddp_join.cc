// DistributedDataParallel's part in a train::Join (join.h): the hook that
// shadows the active ranks' steps on a rank that ran out of batches, and the
// final model sync. PyTorch: _DDPJoinHook in torch/nn/parallel/distributed.py.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/ops.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/ddp/comm_hook.h"
#include "train/parallel/ddp/ddp.h"
#include "train/parallel/ddp/join.h"

namespace tandem::train {

// Owned by the Join; `ddp` outlives it (join.h's contract).
class DdpJoinHook : public JoinHook {
 public:
  explicit DdpJoinHook(DistributedDataParallel* ddp) : ddp_(ddp) {}
  absl::Status MainHook(const JoinStep& step) override {
    return ddp_->ShadowStep(step);
  }
  absl::Status PostHook(bool is_last_joiner) override {
    return ddp_->SyncFinalModel(is_last_joiner);
  }

 private:
  DistributedDataParallel* ddp_;
};

absl::StatusOr<std::unique_ptr<JoinHook>> DistributedDataParallel::MakeJoinHook(
    const JoinOptions& options) {
  if (reduce_scatter_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": Join does not support ZeroOptions::reduce_scatter_gradients "
        "(ZeRO-2): the "
        "sharded optimizer's own collectives (its parameter all-gather) have "
        "no shadow on a rank that finished; give every rank the same number "
        "of batches"));
  }
  if (!options.divide_by_initial_world_size &&
      WireDType(options_.comm_hook).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": JoinOptions::divide_by_initial_world_size = false with the ",
        DdpCommHookName(options_.comm_hook),
        " comm hook: the compressing hooks divide by the world size, as "
        "PyTorch's do (which ignore the option silently); use "
        "DdpCommHook::kAllReduce or divide by the initial world size"));
  }
  divide_by_initial_world_size_ = options.divide_by_initial_world_size;
  return std::unique_ptr<JoinHook>(new DdpJoinHook(this));
}

Device DistributedDataParallel::join_device() const {
  return params_.front().param.device();
}

absl::Status DistributedDataParallel::CheckJoinStep(const JoinStep& step,
                                                    int rank) {
  const auto mixed = [&](int64_t n) {
    return n != 0 && n != step.active_ranks;
  };
  if (!mixed(step.syncing_ranks) && !mixed(step.broadcasting_ranks)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "DistributedDataParallel on rank ", rank, ": of the ", step.active_ranks,
      " ranks still training, ", step.syncing_ranks,
      " open a synchronised step and ", step.broadcasting_ranks,
      " broadcast buffers in this step; every rank must make the same DDP "
      "calls (grad mode, NoSync()) in the same order"));
}

absl::StatusOr<int> DistributedDataParallel::HighestRankWhere(bool candidate) {
  int64_t value = candidate ? rank_ : -1;
  TANDEM_RETURN_IF_ERROR(
      AllReduceInt64(*comm_, join_device(), absl::MakeSpan(&value, 1),
                     comm::ReduceOp::kMax, options_.timeout));
  if (value < 0 || value >= world_size_) {
    return absl::InternalError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": no rank qualified as the source of the broadcast (max = ", value,
        "); the ranks disagree on which of them still train"));
  }
  return static_cast<int>(value);
}

absl::Status DistributedDataParallel::ShadowStep(const JoinStep& step) {
  if (step_ != DdpStepState::kIdle) {
    return absl::FailedPreconditionError(absl::StrCat(
        "DistributedDataParallel on rank ", rank_,
        ": Join::Finish with a DDP step open (step state ",
        DdpStepStateName(step_),
        "); finish the last step (ddp.Backward(loss)) before Join::Finish"));
  }
  TANDEM_RETURN_IF_ERROR(CheckJoinStep(step, rank_));
  if (step.broadcasting_ranks > 0) {
    // The active ranks agree on the source among themselves; this rank is
    // not a candidate (its buffers are stale).
    TANDEM_ASSIGN_OR_RETURN(const int root, HighestRankWhere(false));
    TANDEM_RETURN_IF_ERROR(BroadcastBuffers(root));
  }
  if (step.syncing_ranks == 0) return absl::OkStatus();
  // The active ranks' backward reduces every bucket: contribute zeros to
  // the same collectives (the same ops: divisor_ decides kAvg or kSum).
  divisor_ = divide_by_initial_world_size_ ? world_size_ : step.active_ranks;
  absl::Status status;
  // The buckets receive the reduced sums below: a gradient marked zero
  // (Tensor::MarkGradZero) is written now, or its first read would
  // overwrite them with zeros.
  for (const ParamState& p : params_) p.param.grad();
  for (const DdpBucket& bucket : buckets_) {
    if (!bucket.flat.storage()->is_allocated()) {
      status.Update(bucket.flat.storage()->Reallocate());
    }
    if (status.ok()) status.Update(FillInPlace(bucket.flat, 0.0));
  }
  if (status.ok()) {
    for (BucketState& b : bucket_states_) b.pending = 0;
    LaunchCompleteBuckets();
    status = WaitLaunched(absl::Now() + options_.timeout);
  }
  ResetIteration();
  if (!status.ok()) {
    return absl::Status(
        status.code(),
        absl::StrCat("while shadowing a step of the ranks still training "
                     "(Join::Finish): ",
                     status.message()));
  }
  return absl::OkStatus();
}

absl::Status DistributedDataParallel::SyncFinalModel(bool is_last_joiner) {
  if (world_size_ == 1) return absl::OkStatus();
  // The last ranks to finish stepped their optimizer through every step;
  // the others stopped early, so their parameters are stale.
  TANDEM_ASSIGN_OR_RETURN(const int root, HighestRankWhere(is_last_joiner));
  TANDEM_RETURN_IF_ERROR(
      BroadcastFrom(module_->NamedParameters(), root, "parameter"));
  return BroadcastFrom(module_->NamedBuffers(), root, "buffer");
}

}  // namespace tandem::train
