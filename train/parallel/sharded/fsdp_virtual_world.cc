// FullyShardedDataParallel in the virtual world (FsdpOptions::virtual_world,
// docs/virtual_world.md): each virtual rank's full unit gradients are
// folded along the canonical tree, the ranks' trees summed by the ordered
// all-reduce of the whole unit, and each rank keeps its shard. The sums are
// DDP's in the virtual world element for element (the same 1/K scaling,
// the same tree), so the weights equal DDP's bit for bit; the gradient norm
// is optim::ClipGradNorm's over the whole gradients.
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "comm/ordered/ordered_sum.h"
#include "comm/types.h"
#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"
#include "tensor/optim/clip_grad.h"
#include "train/parallel/core/virtual_world.h"
#include "train/parallel/sharded/fsdp.h"

namespace tandem::train {

absl::Status FullyShardedDataParallel::FoldVirtualRank() {
  if (virtual_local_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("FullyShardedDataParallel on rank ", rank_,
                     ": FoldVirtualRank outside the virtual world "
                     "(FsdpOptions::virtual_world)"));
  }
  const double scale = 1.0 / static_cast<double>(virtual_local_ * world_size_);
  for (Unit& u : units_) {
    if (!u.full_grad.storage()->is_allocated()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_, ": ", UnitName(u),
          " has no gradient to fold; run a backward for each virtual rank "
          "before FoldVirtualRank"));
    }
    NoGradGuard no_grad;
    Tensor g = u.full_grad;
    if (g.dtype() != u.master_dtype) {
      TANDEM_ASSIGN_OR_RETURN(g, g.To(u.master_dtype));
    }
    // DDP's scaling of a rank's gradient before its all-reduce (for a
    // power-of-two K, of the sum instead: VirtualScaleAfterSum).
    if (!VirtualScaleAfterSum(virtual_local_ * world_size_)) {
      TANDEM_RETURN_IF_ERROR(ScaleInPlace(g, scale));
    }
    if (g.device() != Device::CPU()) {
      TANDEM_ASSIGN_OR_RETURN(g, g.To(Device::CPU()));
    }
    if (!u.virtual_sum.has_value()) {
      TANDEM_ASSIGN_OR_RETURN(
          u.virtual_sum,
          TreeAccumulator::Create(virtual_local_, u.master_dtype, g.numel()));
    }
    TANDEM_RETURN_IF_ERROR(
        Annotate(u.virtual_sum->Add(g.raw_data()), UnitName(u)));
    for (const FlatParamMember& m : u.group.members()) m.tensor.ClearGrad();
    u.full_grad.storage()->Free();
  }
  return absl::OkStatus();
}

absl::Status FullyShardedDataParallel::FinishVirtualStep() {
  if (virtual_local_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("FullyShardedDataParallel on rank ", rank_,
                     ": FinishVirtualStep outside the virtual world "
                     "(FsdpOptions::virtual_world)"));
  }
  virtual_parts_.assign(model_->NamedParameters().size(), 0.0);
  for (Unit& u : units_) {
    if (!u.virtual_sum.has_value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("FullyShardedDataParallel on rank ", rank_, ": ",
                       UnitName(u), " folded no virtual rank in this step"));
    }
    TANDEM_ASSIGN_OR_RETURN(void* subtree, u.virtual_sum->mutable_result());
    char* sum = static_cast<char*>(subtree);
    const int64_t count = u.full_grad.numel();  // N * shard, padded
    // N * shard is a multiple of the world size: reduced in place.
    TANDEM_RETURN_IF_ERROR(Annotate(
        comm::OrderedAllReduce(*comm_,
                               comm::HostView(sum, count, u.master_dtype),
                               &virtual_workspace_),
        absl::StrCat("ordered all-reduce of ", UnitName(u))));
    if (VirtualScaleAfterSum(virtual_local_ * world_size_)) {
      TANDEM_ASSIGN_OR_RETURN(
          const Tensor whole,
          Tensor::FromBuffer(sum, count, u.master_dtype, {count}));
      TANDEM_RETURN_IF_ERROR(ScaleInPlace(
          whole, 1.0 / static_cast<double>(virtual_local_ * world_size_)));
      std::memcpy(sum, whole.raw_data(), count * DTypeSize(u.master_dtype));
    }
    // Each parameter's part of the 2-norm, from its whole gradient, as
    // optim::ClipGradNorm computes it on an unsharded model.
    for (const FlatParamMember& m : u.group.members()) {
      TANDEM_ASSIGN_OR_RETURN(
          const Tensor whole,
          Tensor::FromBuffer(sum + m.offset * DTypeSize(u.master_dtype),
                             m.numel, u.master_dtype, m.shape));
      TANDEM_ASSIGN_OR_RETURN(virtual_parts_[m.index],
                              optim::GradNormPart({whole}, 2.0));
    }
    TANDEM_ASSIGN_OR_RETURN(
        Tensor mine,
        Tensor::FromBuffer(sum + rank_ * u.shard * DTypeSize(u.master_dtype),
                           u.shard, u.master_dtype, {u.shard}));
    if (u.shard_grad.device() != Device::CPU()) {
      TANDEM_ASSIGN_OR_RETURN(mine, mine.To(u.shard_grad.device()));
    }
    // Added like any gradient: the shard's grad is zeroed by the user.
    TANDEM_RETURN_IF_ERROR(AddInPlace(u.shard_grad, mine));
    u.virtual_sum->Reset();
  }
  return absl::OkStatus();
}

absl::StatusOr<double> FullyShardedDataParallel::ClipVirtualGradNorm(
    const std::vector<Tensor>& grads, double max_norm,
    const optim::ClipGradNormOptions& options) {
  TANDEM_RETURN_IF_ERROR(optim::CheckClipArguments(max_norm, options));
  if (options.norm_type != 2.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_,
        ": in the virtual world the gradient norm is the 2-norm; norm_type ",
        options.norm_type, " is not kept"));
  }
  if (virtual_parts_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("FullyShardedDataParallel on rank ", rank_,
                     ": ClipGradNorm before FinishVirtualStep"));
  }
  // The parts in parameter order, summed as GradNormPart sums them.
  double part = 0;
  for (double p : virtual_parts_) part += p;
  const double total = optim::TotalNormFromPart(part, 2.0);
  TANDEM_RETURN_IF_ERROR(
      optim::ScaleGradsToNorm(grads, max_norm, total, options));
  return total;
}

}  // namespace tandem::train
