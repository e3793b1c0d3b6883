#include "train/parallel/strategy.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/optim/clip_grad.h"
#include "tensor/optim/param_groups.h"
#include "train/parallel/core/tensor_comm.h"
#include "train/parallel/sharded/shard_weight_decay.h"

namespace tandem::train {

absl::StatusOr<ShardMode> ParseShardMode(std::string_view text) {
  if (text == "none" || text == "ddp") return ShardMode::kNone;
  if (text == "zero1") return ShardMode::kZero1;
  if (text == "zero2") return ShardMode::kZero2;
  if (text == "fsdp") return ShardMode::kFsdp;
  return absl::InvalidArgumentError(
      absl::StrCat("--shard=", std::string(text),
                   " is not a sharding mode; use none (DDP), zero1 "
                   "(optimizer state sharded), zero2 (and gradients) or fsdp "
                   "(and parameters)"));
}

std::string ShardModeName(ShardMode mode) {
  switch (mode) {
    case ShardMode::kNone:
      return "none";
    case ShardMode::kZero1:
      return "zero1";
    case ShardMode::kZero2:
      return "zero2";
    case ShardMode::kFsdp:
      return "fsdp";
    case ShardMode::kLocal:
      return "local";
    case ShardMode::kPipeline:
      return "pipeline";
  }
  return "unknown";
}

absl::Status CheckShardAmp(ShardMode mode, std::optional<DType> amp) {
  if (mode == ShardMode::kFsdp && amp == DType::kF16) {
    return absl::InvalidArgumentError(
        "--shard=fsdp with --amp=f16 would gather and compute the parameters "
        "in f16, whose narrow range needs loss scaling (a GradScaler), which "
        "this example does not run; use --amp=bf16 (same range as f32)");
  }
  return absl::OkStatus();
}

ShardOptimizerFactory SgdFactory(double lr, optim::SgdOptions options) {
  return [lr, options](std::vector<Tensor> params)
             -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                            optim::Sgd::Create(std::move(params), lr, options));
    return std::make_unique<optim::Sgd>(std::move(sgd));
  };
}

ShardOptimizerFactory AdamWFactory(optim::AdamWOptions options) {
  return [options](std::vector<Tensor> params)
             -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
    TANDEM_ASSIGN_OR_RETURN(
        optim::AdamW adam,
        optim::AdamW::Create(
            optim::WeightDecayGroups(std::move(params), options.weight_decay),
            options));
    return std::make_unique<optim::AdamW>(std::move(adam));
  };
}

namespace {

// The dotted name of the first SyncBatchNorm inside `m` ("" for none;
// `path` is m's own).
std::string FirstSyncBatchNorm(const nn::Module& m, const std::string& path) {
  if (m.type_name() == "SyncBatchNorm")
    return path.empty() ? "the model" : path;
  for (const auto& [name, child] : m.NamedChildren()) {
    std::string found =
        FirstSyncBatchNorm(*child, path.empty() ? name : path + "." + name);
    if (!found.empty()) return found;
  }
  return "";
}

}  // namespace

absl::Status Strategy::SnapshotVirtualBuffers() {
  NoGradGuard no_grad;
  const std::vector<Tensor> buffers = model_->Buffers();
  // The last step's copies are reused (no allocation per step) while the
  // module's buffers keep their shapes.
  bool reuse = virtual_buffers_.size() == buffers.size();
  for (size_t i = 0; reuse && i < buffers.size(); ++i) {
    reuse = virtual_buffers_[i].shape() == buffers[i].shape() &&
            virtual_buffers_[i].dtype() == buffers[i].dtype() &&
            virtual_buffers_[i].device() == buffers[i].device();
  }
  if (reuse) {
    for (size_t i = 0; i < buffers.size(); ++i) {
      TANDEM_RETURN_IF_ERROR(virtual_buffers_[i].CopyFrom(buffers[i]));
    }
    return absl::OkStatus();
  }
  virtual_buffers_.clear();
  for (const Tensor& b : buffers) {
    TANDEM_ASSIGN_OR_RETURN(Tensor copy, b.Clone());
    virtual_buffers_.push_back(std::move(copy));
  }
  return absl::OkStatus();
}

absl::Status Strategy::SettleVirtualBuffers() {
  NoGradGuard no_grad;
  const std::vector<Tensor> buffers = model_->Buffers();
  for (size_t i = 0; i < buffers.size() && i < virtual_buffers_.size(); ++i) {
    TANDEM_RETURN_IF_ERROR(buffers[i].CopyFrom(virtual_buffers_[i]));
  }
  if (comm_->size() == 1) return absl::OkStatus();
  // Rank 0's are virtual rank 0's: every rank takes them, as DDP's buffer
  // broadcast gives every rank rank 0's before the next forward.
  for (const Tensor& b : buffers) {
    Tensor host = b;
    if (!b.device().is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(host, b.To(Device::CPU()));
    }
    TANDEM_ASSIGN_OR_RETURN(comm::BufferView view, ToBufferView(host));
    TANDEM_RETURN_IF_ERROR(comm_->Broadcast(view, 0)->Wait(absl::Minutes(30)));
    if (!b.device().is_cpu()) TANDEM_RETURN_IF_ERROR(b.CopyFrom(host));
  }
  return absl::OkStatus();
}

absl::Status Strategy::FoldVirtualRank() {
  // BatchNorm's running statistics: the first virtual rank's update is
  // kept (on rank 0 that is virtual rank 0's, what DDP at K keeps); the
  // others' are dropped at ReduceVirtualRanks.
  if (virtual_folded_++ == 0 && virtual_world_.on()) {
    TANDEM_RETURN_IF_ERROR(SnapshotVirtualBuffers());
  }
  if (fsdp_ != nullptr && virtual_world_.on()) return fsdp_->FoldVirtualRank();
  if (virtual_grads_ == nullptr) {
    return absl::FailedPreconditionError(
        "FoldVirtualRank: the virtual world is off "
        "(StrategyOptions::virtual_world)");
  }
  return virtual_grads_->Fold();
}

absl::Status Strategy::ReduceVirtualRanks() {
  if (virtual_world_.on()) {
    virtual_folded_ = 0;
    TANDEM_RETURN_IF_ERROR(SettleVirtualBuffers());
  }
  if (fsdp_ != nullptr && virtual_world_.on()) {
    return fsdp_->FinishVirtualStep();
  }
  if (virtual_grads_ == nullptr) {
    return absl::FailedPreconditionError(
        "ReduceVirtualRanks: the virtual world is off "
        "(StrategyOptions::virtual_world)");
  }
  return virtual_grads_->Reduce();
}

absl::StatusOr<std::unique_ptr<Strategy>> Strategy::Create(
    ShardMode mode, nn::Module& model, comm::Communicator& comm,
    const ShardOptimizerFactory& make_optimizer,
    const StrategyOptions& options) {
  if (mode == ShardMode::kPipeline) {
    return absl::InvalidArgumentError(
        "the pipeline strategy needs a schedule, micro-batch count and loss: "
        "create it with Strategy::CreatePipeline");
  }
  std::unique_ptr<Strategy> t(new Strategy(mode, model, comm));
  if (options.virtual_world != 0) {
    TANDEM_ASSIGN_OR_RETURN(
        t->virtual_world_,
        PlaceVirtualWorld(options.virtual_world, comm.size(), comm.rank()));
    if (options.comm_hook != DdpCommHook::kAllReduce) {
      return absl::UnimplementedError(absl::StrCat(
          "--virtual_world=", options.virtual_world,
          " sums the gradients in f32 along its fixed tree; a compressing "
          "comm hook (--comm_hook=",
          DdpCommHookName(options.comm_hook),
          ") is not part of that order: use --comm_hook=allreduce"));
    }
    if (const std::string sync = FirstSyncBatchNorm(model, ""); !sync.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          "--virtual_world=", options.virtual_world,
          ": the model has a "
          "SyncBatchNorm (",
          sync,
          "), whose statistics are reduced across the real ranks, in an "
          "order that depends on W; run without --sync_bn (each virtual "
          "rank then normalises over its own batch, as DDP at K does)"));
    }
    // fsdp folds and reduces its units itself (FsdpOptions::virtual_world).
    std::vector<Tensor> params;
    for (const Tensor& p : model.Parameters()) {
      if (p.requires_grad()) params.push_back(p);
    }
    if (mode != ShardMode::kFsdp) {
      TANDEM_ASSIGN_OR_RETURN(
          t->virtual_grads_,
          VirtualGradSum::Create(
              comm, t->virtual_world_, std::move(params),
              // ZeRO reads the gradients from DDP's flat buckets, so the
              // sum is copied back there; elsewhere the grads are views of
              // the tree's own buffers (no leaf copied).
              /*grads_in_place=*/mode != ShardMode::kZero1 &&
                  mode != ShardMode::kZero2));
    }
  } else {
    t->virtual_world_.first = comm.rank();
  }
  if (mode == ShardMode::kLocal) {
    if (comm.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the local strategy trains without communication, so it needs a "
          "world of one rank; found ",
          comm.size(), " ranks (rank ", comm.rank(),
          "): use none (DDP), zero1, zero2 or fsdp"));
    }
    TANDEM_ASSIGN_OR_RETURN(t->optimizer_, make_optimizer(model.Parameters()));
    return t;
  }
  // The sharded modes: the param groups of an optimizer of the model's own
  // parameters, read before wrapping (FSDP frees the parameters).
  const std::vector<nn::NamedTensor> named = model.NamedParameters();
  if (mode == ShardMode::kFsdp && options.fsdp_unit_layers.empty() &&
      dynamic_cast<nn::Sequential*>(&model) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fsdp shards one unit per layer of an nn::Sequential; the model is "
        "a ",
        std::string(model.type_name()),
        ": give fsdp its Sequential or use none (DDP), zero1 or zero2"));
  }
  if (mode != ShardMode::kNone) {
    TANDEM_ASSIGN_OR_RETURN(t->groups_, make_optimizer(model.Parameters()));
  }
  if (mode == ShardMode::kFsdp) {
    FsdpOptions fsdp_options;
    fsdp_options.param_dtype = options.fsdp_param_dtype;
    fsdp_options.unit_layers = options.fsdp_unit_layers;
    fsdp_options.virtual_world = options.virtual_world;
    TANDEM_ASSIGN_OR_RETURN(
        t->fsdp_, FullyShardedDataParallel::Create(model, comm, fsdp_options));
    TANDEM_ASSIGN_OR_RETURN(t->optimizer_,
                            make_optimizer(t->fsdp_->ShardParameters()));
    TANDEM_RETURN_IF_ERROR(ApplyParamGroupWeightDecay(
        *t->groups_, named, t->fsdp_->ShardLayout(), t->optimizer_.get()));
    return t;
  }
  DdpOptions ddp_options;
  ddp_options.comm_hook = options.comm_hook;
  // The virtual world's gradients are views of its summation tree (ZeRO
  // reads DDP's buckets, so there they stay DDP's).
  ddp_options.no_sync_keeps_gradients =
      t->virtual_grads_ != nullptr && mode == ShardMode::kNone;
  TANDEM_ASSIGN_OR_RETURN(
      t->ddp_, DistributedDataParallel::Create(model, comm, ddp_options));
  if (mode == ShardMode::kNone) {
    TANDEM_ASSIGN_OR_RETURN(t->optimizer_, make_optimizer(model.Parameters()));
  } else {
    TANDEM_ASSIGN_OR_RETURN(
        t->zero_, ZeroRedundancyOptimizer::Create(
                      *t->ddp_, make_optimizer,
                      {.reduce_scatter_gradients = mode == ShardMode::kZero2}));
    TANDEM_RETURN_IF_ERROR(
        ApplyParamGroupWeightDecay(*t->groups_, named, t->zero_->shard_layout(),
                                   t->zero_->local_optimizer()));
  }
  return t;
}

absl::StatusOr<Tensor> Strategy::Forward(const Tensor& input) {
  TANDEM_RETURN_IF_ERROR(NotUnderPipeline("Forward"));
  if (fsdp_ != nullptr) return fsdp_->Forward(input);
  if (ddp_ == nullptr || !IsGradEnabled()) return model_->Forward(input);
  return ddp_->Forward(input);
}

absl::Status Strategy::Backward(const Tensor& loss) {
  TANDEM_RETURN_IF_ERROR(NotUnderPipeline("Backward"));
  if (fsdp_ != nullptr) return fsdp_->Backward(loss);
  if (ddp_ != nullptr) return ddp_->Backward(loss);
  return loss.Backward();  // local
}

absl::Status Strategy::Step() {
  return zero_ != nullptr ? zero_->Step() : optimizer_->Step();
}

void Strategy::ZeroGrad() {
  if (zero_ != nullptr) {
    zero_->ZeroGrad();
  } else if (fsdp_ != nullptr) {
    optimizer_->ZeroGrad();
  } else if (pipeline_ == nullptr) {
    // Local and DDP: only autograd writes these gradients (DDP's through
    // its bucket views), so they are marked zero instead of filled: the
    // backward's first write overwrites (Tensor::MarkGradZero).
    model_->MarkGradsZero();
  } else {
    model_->ZeroGrad();
  }
}

absl::StatusOr<double> Strategy::ClipGradNorm(double max_norm) {
  if (virtual_grads_ != nullptr && fsdp_ == nullptr) {
    // The virtual world's gradients are whole and the same on every rank
    // (zero1 and zero2 too: ZeRO takes its slices at Step): the norm of
    // the full gradients, as DDP's, with no communication.
    return optim::ClipGradNorm(model_->Parameters(), max_norm);
  }
  if (zero_ != nullptr) return zero_->ClipGradNorm(max_norm);
  if (fsdp_ != nullptr) return fsdp_->ClipGradNorm(max_norm);
  if (pipeline_ != nullptr) return ClipPipelineGradNorm(max_norm);
  return optim::ClipGradNorm(model_->Parameters(), max_norm);
}

std::optional<DistributedDataParallel::NoSyncGuard> Strategy::NoSync() {
  if (ddp_ == nullptr || pipeline_ != nullptr) return std::nullopt;
  return ddp_->NoSync();
}

std::vector<FlatShard> Strategy::ShardLayout() const {
  if (zero_ != nullptr) return zero_->shard_layout();
  if (fsdp_ != nullptr) return fsdp_->ShardLayout();
  return {};
}

optim::Optimizer* Strategy::local_optimizer() const {
  return zero_ != nullptr ? zero_->local_optimizer() : optimizer_.get();
}

double Strategy::lr() const {
  const optim::Optimizer* o = local_optimizer();
  return o == nullptr ? 0.0 : o->lr();
}

std::vector<optim::ParamGroupState> Strategy::FullParamGroups() const {
  const optim::Optimizer* o = local_optimizer();
  if (o == nullptr || pipeline_ != nullptr) return {};
  const std::vector<optim::ParamGroupState> local = o->ExportParamGroups();
  if (local.empty()) return {};
  if (groups_ != nullptr) {
    std::vector<optim::ParamGroupState> whole = groups_->ExportParamGroups();
    for (optim::ParamGroupState& g : whole) g.options["lr"] = o->lr();
    return whole;
  }
  optim::ParamGroupState whole;
  whole.options = local.front().options;
  const int64_t n = static_cast<int64_t>(model_->Parameters().size());
  for (int64_t i = 0; i < n; ++i) whole.params.push_back(i);
  return {whole};
}

absl::StatusOr<nn::StateDict> Strategy::FullModelState() {
  TANDEM_RETURN_IF_ERROR(NotUnderPipeline("FullModelState"));
  if (fsdp_ != nullptr) return fsdp_->FullStateDict();
  nn::StateDict out;
  for (const nn::NamedTensor& e : model_->StateDict()) {
    TANDEM_ASSIGN_OR_RETURN(Tensor copy, e.tensor.Clone());
    out.push_back({e.name, copy});
  }
  return out;
}

absl::StatusOr<std::vector<optim::StateEntry>> Strategy::FullOptimizerState() {
  TANDEM_RETURN_IF_ERROR(NotUnderPipeline("FullOptimizerState"));
  if (zero_ != nullptr) {
    return GatherFullOptimizerState(*comm_, zero_->shard_layout(),
                                    zero_->local_optimizer());
  }
  if (fsdp_ != nullptr) {
    return GatherFullOptimizerState(*comm_, fsdp_->ShardLayout(),
                                    optimizer_.get());
  }
  std::vector<optim::StateEntry> out;
  for (const optim::StateEntry& e : optimizer_->ExportState()) {
    TANDEM_ASSIGN_OR_RETURN(Tensor copy, e.tensor.Clone());
    out.push_back({e.name, copy});
  }
  return out;
}

absl::Status Strategy::LoadFullModelState(const nn::StateDict& state) {
  TANDEM_RETURN_IF_ERROR(NotUnderPipeline("LoadFullModelState"));
  if (fsdp_ != nullptr) return fsdp_->LoadFullStateDict(state);
  // ZeRO: the parameters are views of the flat buffers; LoadStateDict
  // copies in place, so the buffers follow.
  return model_->LoadStateDict(state);
}

absl::Status Strategy::LoadFullOptimizerState(
    const std::vector<optim::StateEntry>& state) {
  TANDEM_RETURN_IF_ERROR(NotUnderPipeline("LoadFullOptimizerState"));
  if (zero_ != nullptr) {
    return train::LoadFullOptimizerState(
        zero_->shard_layout(), state, zero_->local_optimizer(), comm_->rank());
  }
  if (fsdp_ != nullptr) {
    return train::LoadFullOptimizerState(fsdp_->ShardLayout(), state,
                                         optimizer_.get(), comm_->rank());
  }
  return optimizer_->ImportState(state);
}

}  // namespace tandem::train
