// FullyShardedDataParallel's view of its state from outside a step: the
// shards an optimizer steps, their layout (for sharded optimizer
// checkpoints), and the full, unsharded state dict gathered for saving or
// sliced on loading. The step itself is in fsdp.cc.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/sharded/fsdp.h"

namespace tandem::train {

std::vector<Tensor> FullyShardedDataParallel::ShardParameters() const {
  std::vector<Tensor> out;
  out.reserve(units_.size());
  for (const Unit& u : units_) out.push_back(u.shard_param);
  return out;
}

std::vector<FlatShard> FullyShardedDataParallel::ShardLayout() const {
  std::vector<FlatShard> out;
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    FlatShard flat;
    flat.group = u.group;
    flat.shard = u.shard;
    flat.local_begin = rank_ * u.shard;
    flat.local_end = (rank_ + 1) * u.shard;
    flat.local_index = static_cast<int64_t>(i);
    out.push_back(std::move(flat));
  }
  return out;
}

absl::StatusOr<Tensor> FullyShardedDataParallel::GatherMaster(Unit& u) {
  TANDEM_ASSIGN_OR_RETURN(Tensor full,
                          u.group.NewBuffer(world_size_, std::nullopt,
                                            /*zeroed=*/false));
  if (world_size_ == 1) {
    TANDEM_RETURN_IF_ERROR(full.CopyFrom(u.shard_param.Detach()));
    return full;
  }
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView send, ToBufferView(u.shard_param));
  TANDEM_ASSIGN_OR_RETURN(comm::BufferView recv, ToBufferView(full));
  TANDEM_RETURN_IF_ERROR(Annotate(
      comm_->AllGather(send, recv)->Wait(options_.timeout),
      absl::StrCat("all-gather of ", UnitName(u), "'s master shards")));
  return full;
}

absl::StatusOr<nn::StateDict> FullyShardedDataParallel::FullStateDict() {
  if (step_open_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "FullyShardedDataParallel on rank ", rank_,
        ": FullStateDict during a step; call it between Backward and the "
        "next Forward"));
  }
  // Gathered from the master shards (not the compute-dtype unit buffers),
  // so the state is in the parameters' own dtype with or without mixed
  // precision.
  const std::vector<nn::NamedTensor> params = model_->NamedParameters();
  std::vector<Tensor> by_index(params.size());
  NoGradGuard no_grad;
  for (Unit& u : units_) {
    TANDEM_ASSIGN_OR_RETURN(Tensor full, GatherMaster(u));
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> views, u.group.Views(full));
    for (int64_t k = 0; k < u.group.size(); ++k) {
      const int64_t index = u.group.members()[k].index;
      if (index >= static_cast<int64_t>(by_index.size())) continue;
      TANDEM_ASSIGN_OR_RETURN(by_index[index], views[k].Clone());
    }
  }
  // Registration order, as Module::StateDict would list the parameters.
  nn::StateDict ordered;
  for (size_t j = 0; j < params.size(); ++j) {
    ordered.push_back({params[j].name, by_index[j]});
  }
  for (const nn::NamedTensor& b : model_->NamedBuffers()) {
    TANDEM_ASSIGN_OR_RETURN(Tensor copy, b.tensor.Clone());
    ordered.push_back({b.name, copy});
  }
  return ordered;
}

absl::Status FullyShardedDataParallel::LoadFullStateDict(
    const nn::StateDict& state) {
  std::map<std::string, Tensor> by_name;
  for (const nn::NamedTensor& e : state) by_name[e.name] = e.tensor;
  // Check everything first: all or nothing.
  for (const Unit& u : units_) {
    if (u.gather != nullptr || u.gathered || step_open_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "FullyShardedDataParallel on rank ", rank_,
          ": LoadFullStateDict during a step; call it between steps"));
    }
    for (const FlatParamMember& p : u.group.members()) {
      auto it = by_name.find(p.name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FullyShardedDataParallel on rank ", rank_,
            ": LoadFullStateDict: the state has no \"", p.name,
            "\"; pass a full state (FullStateDict, or an unwrapped model's "
            "StateDict)"));
      }
      if (it->second.shape() != p.shape ||
          it->second.dtype() != u.master_dtype) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FullyShardedDataParallel on rank ", rank_,
            ": LoadFullStateDict: \"", p.name, "\" is ",
            DTypeName(it->second.dtype()), ShapeToString(it->second.shape()),
            " in the state but ", DTypeName(u.master_dtype),
            ShapeToString(p.shape), " in the model"));
      }
    }
  }
  NoGradGuard no_grad;
  for (Unit& u : units_) {
    TANDEM_ASSIGN_OR_RETURN(Tensor full, u.group.NewBuffer(world_size_));
    TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> slots, u.group.Views(full));
    for (int64_t k = 0; k < u.group.size(); ++k) {
      TANDEM_RETURN_IF_ERROR(
          slots[k].CopyFrom(by_name[u.group.members()[k].name]));
    }
    TANDEM_ASSIGN_OR_RETURN(const FlatShardRange range,
                            u.group.Shard(rank_, world_size_));
    TANDEM_ASSIGN_OR_RETURN(Tensor mine,
                            full.View(range.begin, {range.numel()}));
    TANDEM_RETURN_IF_ERROR(u.shard_param.CopyFrom(mine));
  }
  for (const nn::NamedTensor& b : model_->NamedBuffers()) {
    auto it = by_name.find(b.name);
    if (it != by_name.end())
      TANDEM_RETURN_IF_ERROR(b.tensor.CopyFrom(it->second));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
