#include "train/parallel/sharded/zero_optimizer.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "comm/work.h"
#include "tensor/autograd/autograd.h"
#include "tensor/nn/module.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/sharded/grad_clip.h"

namespace tandem::train {
namespace {

absl::Status Annotate(const absl::Status& status, int rank,
                      const std::string& context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("ZeroRedundancyOptimizer on rank ", rank,
                                   ": ", context, ": ", status.message()));
}

}  // namespace

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(DistributedDataParallel& ddp,
                                                 const ZeroOptions& options)
    : ddp_(&ddp),
      options_(options),
      rank_(ddp.rank()),
      world_size_(ddp.world_size()),
      stage_(options.reduce_scatter_gradients ? 2 : 1) {}

absl::StatusOr<std::unique_ptr<ZeroRedundancyOptimizer>>
ZeroRedundancyOptimizer::Create(DistributedDataParallel& ddp,
                                const ShardOptimizerFactory& make_optimizer,
                                const ZeroOptions& options) {
  if (!make_optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ZeroRedundancyOptimizer on rank ", ddp.rank(),
        ": make_optimizer is empty; pass a function that builds the "
        "optimizer of a list of shard tensors (e.g. optim::Sgd::Create)"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ZeroRedundancyOptimizer on rank ", ddp.rank(),
                     ": ZeroOptions::timeout must be positive, got ",
                     absl::FormatDuration(options.timeout)));
  }
  std::unique_ptr<ZeroRedundancyOptimizer> zero(
      new ZeroRedundancyOptimizer(ddp, options));
  TANDEM_RETURN_IF_ERROR(zero->CheckModuleUnchanged());
  if (options.reduce_scatter_gradients) {
    TANDEM_RETURN_IF_ERROR(ddp.ReduceScatterGradients());
  }
  TANDEM_RETURN_IF_ERROR(zero->Build(make_optimizer));
  return zero;
}

absl::Status ZeroRedundancyOptimizer::CheckModuleUnchanged() const {
  const std::vector<nn::NamedTensor> params = ddp_->module().NamedParameters();
  for (const DdpBucket& bucket : ddp_->buckets()) {
    for (const FlatParamMember& m : bucket.group.members()) {
      if (m.index < static_cast<int64_t>(params.size()) &&
          params[m.index].tensor.impl() == m.tensor.impl()) {
        continue;
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "ZeroRedundancyOptimizer on rank ", rank_, ": DDP's bucket holds \"",
          m.name, "\" as parameter ", m.index, " of the module, but ",
          m.index < static_cast<int64_t>(params.size())
              ? absl::StrCat("the module's parameter ", m.index, " (\"",
                             params[m.index].name, "\") is another tensor")
              : absl::StrCat("the module has only ", params.size(),
                             " parameters"),
          ": the module changed after DDP wrapped it. Build the model "
          "completely, then wrap it in DDP, then create the optimizer"));
    }
  }
  return absl::OkStatus();
}

absl::Status ZeroRedundancyOptimizer::Build(
    const ShardOptimizerFactory& make_optimizer) {
  const int64_t n = world_size_;
  for (const DdpBucket& bucket : ddp_->buckets()) {
    // The parameters move into a buffer of the bucket's layout, padded to
    // N * s; rank r steps the members' elements of its shard.
    const FlatParamGroup& group = bucket.group;
    TANDEM_ASSIGN_OR_RETURN(Tensor flat, group.NewBuffer(n));
    TANDEM_RETURN_IF_ERROR(group.Pack(flat));
    TANDEM_RETURN_IF_ERROR(
        Annotate(group.BindParams(flat), rank_, "making the parameters views"));
    TANDEM_ASSIGN_OR_RETURN(FlatShardRange range, group.Shard(rank_, n));
    const int64_t lo = std::min(group.numel(), range.begin);
    const int64_t hi = std::min(group.numel(), range.data_end);
    FlatShard layout;
    layout.group = group;
    layout.shard = range.numel();
    layout.local_begin = lo;
    layout.local_end = hi;
    if (hi > lo) layout.local_index = static_cast<int64_t>(shards_.size());
    layout_.push_back(std::move(layout));
    if (hi > lo) {
      TANDEM_ASSIGN_OR_RETURN(Tensor piece, flat.View(lo, {hi - lo}));
      TANDEM_ASSIGN_OR_RETURN(Tensor grad, bucket.flat.View(lo, {hi - lo}));
      if (stage_ == 2) {
        bucket_slices_.push_back(grad);
        TANDEM_ASSIGN_OR_RETURN(
            grad, Tensor::Zeros({hi - lo}, group.dtype(), group.device()));
      }
      TANDEM_RETURN_IF_ERROR(piece.set_grad(grad));
      shards_.push_back(piece);
      shard_numel_ += hi - lo;
    }
    flats_.push_back(std::move(flat));
    shard_sizes_.push_back(range.numel());
  }
  if (!shards_.empty()) {
    absl::StatusOr<std::unique_ptr<optim::Optimizer>> made =
        make_optimizer(shards_);
    if (!made.ok()) {
      return Annotate(made.status(), rank_, "building the shard optimizer");
    }
    if (*made == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("ZeroRedundancyOptimizer on rank ", rank_,
                       ": make_optimizer returned a null optimizer"));
    }
    optimizer_ = std::move(made).value();
  }
  return absl::OkStatus();
}

absl::Status ZeroRedundancyOptimizer::TakeShardGradients() {
  if (stage_ != 2 || taken_) return absl::OkStatus();
  // Keep this rank's averaged slice, drop the full-size buckets.
  for (size_t i = 0; i < shards_.size(); ++i) {
    if (!bucket_slices_[i].storage()->is_allocated()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ZeroRedundancyOptimizer on rank ", rank_,
          ": Step called twice without a DDP step in between (the "
          "gradient buckets were already taken); run ddp.Forward and "
          "ddp.Backward before each Step"));
    }
    TANDEM_RETURN_IF_ERROR(shards_[i].grad().CopyFrom(bucket_slices_[i]));
  }
  for (const Tensor& p : ddp_->module().Parameters()) p.ClearGrad();
  for (const DdpBucket& bucket : ddp_->buckets()) {
    bucket.flat.storage()->Free();
  }
  taken_ = true;
  return absl::OkStatus();
}

absl::Status ZeroRedundancyOptimizer::Step() {
  TANDEM_RETURN_IF_ERROR(TakeShardGradients());
  taken_ = false;  // the next step's gradients come from DDP again
  if (optimizer_ != nullptr) {
    NoGradGuard no_grad;
    absl::Status stepped = optimizer_->Step();
    // This rank returns without joining the all-gathers; the peers' waits
    // are bounded (and sim aborts them when a rank fails).
    if (!stepped.ok()) return Annotate(stepped, rank_, "local step");
  }
  if (world_size_ == 1) return absl::OkStatus();
  comm::Communicator& comm = ddp_->comm();
  const absl::Time deadline = absl::Now() + options_.timeout;
  std::vector<std::unique_ptr<comm::Work>> works;
  works.reserve(flats_.size());
  for (size_t b = 0; b < flats_.size(); ++b) {
    const int64_t s = shard_sizes_[b];
    absl::StatusOr<Tensor> mine = flats_[b].View(rank_ * s, {s});
    absl::StatusOr<comm::BufferView> send =
        mine.ok() ? ToBufferView(*mine) : mine.status();
    absl::StatusOr<comm::BufferView> recv = ToBufferView(flats_[b]);
    if (!send.ok() || !recv.ok()) {
      works.push_back(
          comm::MakeCompletedWork(send.ok() ? recv.status() : send.status()));
      continue;
    }
    works.push_back(comm.AllGather(*send, *recv));
  }
  // Wait for all of them even after an error: the buffers must not be in
  // use when we return.
  absl::Status first;
  for (size_t b = 0; b < works.size(); ++b) {
    absl::Status s =
        works[b]->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (first.ok() && !s.ok()) {
      first = Annotate(s, rank_,
                       absl::StrCat("all-gather of parameter bucket ", b, " (",
                                    flats_[b].numel(), " elements)"));
    }
  }
  return first;
}

absl::StatusOr<double> ZeroRedundancyOptimizer::ClipGradNorm(
    double max_norm, const optim::ClipGradNormOptions& options) {
  // A failure here is the same on every rank (no DDP step since the last
  // Step), so no rank is left waiting in the all-reduce.
  TANDEM_RETURN_IF_ERROR(TakeShardGradients());
  std::vector<Tensor> grads;
  for (const Tensor& shard : shards_) grads.push_back(shard.grad());
  const Device device =
      flats_.empty() ? Device::CPU() : flats_.front().device();
  return ClipShardedGradNorm(ddp_->comm(), device, grads, max_norm, options,
                             options_.timeout);
}

void ZeroRedundancyOptimizer::ZeroGrad() {
  // Stage 2: the module's gradients are cleared (their buckets freed) and
  // zeroed again when DDP reallocates them; the shards keep their own.
  ddp_->module().ZeroGrad();
  if (optimizer_ != nullptr) optimizer_->ZeroGrad();
}

}  // namespace tandem::train
