// Strategy: the one interface to how a data-parallel run keeps its model,
// gradients and optimizer state across ranks (the examples' --shard flag,
// bench's zero_benchmark, train/loop's TrainingLoop):
//
//   local  the model and its optimizer, no communication (a world of one;
//          not a --shard value: chosen by code)
//   none   DistributedDataParallel + the optimizer on every rank
//   zero1  DDP + ZeroRedundancyOptimizer: optimizer state sharded
//   zero2  DDP reduce-scattering its buckets + ZeroRedundancyOptimizer
//   fsdp   FullyShardedDataParallel (one unit per layer of the model or of
//          a Sequential inside it), optimizer on the parameter shards
//
// All of them give the same weights bit for bit (train/parallel's tests), so
// an example reaches the same loss and accuracy whatever the mode.
//
//   TANDEM_ASSIGN_OR_RETURN(ShardMode mode, ParseShardMode(flag));
//   TANDEM_ASSIGN_OR_RETURN(auto trainer,
//                           Strategy::Create(mode, *model, comm, make));
//   trainer->ZeroGrad();
//   TANDEM_ASSIGN_OR_RETURN(Tensor logits, trainer->Forward(x));
//   ... loss ...
//   TANDEM_RETURN_IF_ERROR(trainer->Backward(loss));
//   TANDEM_RETURN_IF_ERROR(trainer->Step());
//
// Collective like the wrappers it holds; belongs to the rank's thread; the
// model and communicator outlive it.
#ifndef TANDEM_TRAIN_PARALLEL_STRATEGY_H_
#define TANDEM_TRAIN_PARALLEL_STRATEGY_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/dtype.h"
#include "tensor/nn/module.h"
#include "tensor/optim/optimizer.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp.h"
#include "train/parallel/fsdp.h"
#include "train/parallel/sharded_optimizer_state.h"
#include "train/parallel/zero_optimizer.h"

namespace tandem::train {

enum class ShardMode { kNone, kZero1, kZero2, kFsdp, kLocal };

// "none", "zero1", "zero2", "fsdp" (the --shard values; kLocal is not one);
// InvalidArgument naming the choices.
absl::StatusOr<ShardMode> ParseShardMode(std::string_view text);
std::string ShardModeName(ShardMode mode);

// Whether `amp` (an example's --amp) works with `mode`: fsdp gathers the
// parameters in --amp's dtype, and f16 parameters need loss scaling (a
// GradScaler), which the examples that take --shard do not run.
// InvalidArgument saying so for fsdp with f16; OK otherwise.
absl::Status CheckShardAmp(ShardMode mode, std::optional<DType> amp);

// The factory of an optim::Sgd(lr, options) over the tensors it is given
// (Sgd::Create's checks: lr and options finite, PyTorch's rules).
ShardOptimizerFactory SgdFactory(double lr, optim::SgdOptions options = {});

class Strategy {
 public:
  // `make_optimizer` builds the optimizer of the tensors it is given: the
  // model's parameters (local, none), the rank's shards (zero1, zero2,
  // fsdp). Param groups: under zero1, zero2 and fsdp it is also called once
  // with the model's parameters, and each shard element takes the weight
  // decay of its parameter's group there (shard_weight_decay.h), so a
  // factory that builds nanoGPT's decay / no-decay groups from the tensors
  // it gets (decay on >= 2 dims: 1-d shards land in no-decay, then take
  // their parameters' decay) steps the same weights in every mode. fsdp
  // needs an nn::Sequential (one unit per layer) and local a communicator of
  // one rank: InvalidArgument saying so otherwise. `fsdp_param_dtype` (the
  // examples' --amp): under fsdp the units are gathered and computed in it and
  // reduced in it (FsdpOptions::param_dtype; the masters stay f32); the other
  // modes keep f32 parameters and leave low precision to autocast.
  // `fsdp_unit_layers` (FsdpOptions::unit_layers): under fsdp, the dotted name
  // of the Sequential inside `model` whose layers are units (GPT-2:
  // "transformer.h", one unit per block, the rest the root unit); empty:
  // `model` is the Sequential.
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(
      ShardMode mode, nn::Module& model, comm::Communicator& comm,
      const ShardOptimizerFactory& make_optimizer,
      std::optional<DType> fsdp_param_dtype = std::nullopt,
      const std::string& fsdp_unit_layers = "");

  // In grad mode a training step's forward; under NoGradGuard evaluation
  // (FSDP gathers and frees each unit; the others run the model).
  absl::StatusOr<Tensor> Forward(const Tensor& input);
  absl::Status Backward(const Tensor& loss);
  absl::Status Step();
  void ZeroGrad();
  // torch.nn.utils.clip_grad_norm_ over the whole model, between Backward
  // and Step: local and none clip the model's (all-reduced) gradients
  // (optim::ClipGradNorm, no communication); zero1, zero2 and fsdp compute
  // the norm from the shards (grad_clip.h: one all-reduce of one value) and
  // scale the gradients their Step applies. Returns the norm before
  // clipping, the same on every rank. Collective under zero1, zero2, fsdp.
  absl::StatusOr<double> ClipGradNorm(double max_norm);
  // Gradient accumulation: while the guard lives, backward passes only
  // accumulate local gradients (DDP's NoSync, also under zero1 and zero2);
  // nullopt under local and fsdp (fsdp's backward reduce-scatters every
  // micro-batch and accumulates into the gradient shards: the same sum, in
  // another order).
  std::optional<DistributedDataParallel::NoSyncGuard> NoSync();
  // The optimizer this rank steps: the whole model's under local and none,
  // this rank's shards' otherwise (null on a zero1/zero2 rank without
  // elements).
  optim::Optimizer* local_optimizer() const;
  // Which model parameter each element of the local optimizer's tensors
  // belongs to (sharded_optimizer_state.h); empty under local and none.
  std::vector<FlatShard> ShardLayout() const;
  // Whether the model's parameters hold their values between steps (false
  // under fsdp: read them through fsdp()->FullStateDict()).
  bool parameters_resident() const { return fsdp_ == nullptr; }
  FullyShardedDataParallel* fsdp() const { return fsdp_.get(); }
  // DDP under none, zero1 and zero2 (its last_sync_stats feed the progress
  // line); nullptr under local and fsdp.
  const DistributedDataParallel* ddp() const { return ddp_.get(); }
  // The optimizer of the whole model under local and none; nullptr where it
  // holds only this rank's shards.
  optim::Optimizer* full_optimizer() const {
    return zero_ == nullptr && fsdp_ == nullptr ? optimizer_.get() : nullptr;
  }

  // Checkpoints: the full state, the same in every mode and at every world
  // size (what --shard=none on one rank would hold), so a checkpoint saved
  // in one mode and world size loads in any other.
  // The model's state dict (parameters in their own dtype, then buffers).
  // Collective under fsdp (gathers every unit); a copy in every mode.
  absl::StatusOr<nn::StateDict> FullModelState();
  // What an unsharded optimizer of the whole model would export
  // (Optimizer::ExportState). Collective under zero1, zero2 and fsdp
  // (sharded_optimizer_state.h); the tensors are fresh copies.
  absl::StatusOr<std::vector<optim::StateEntry>> FullOptimizerState();
  // Local: each rank takes its part of a full state. Model: all or nothing
  // (InvalidArgument naming the key). Optimizer: all or nothing
  // (InvalidArgument naming the entry and the parameter it does not fit).
  absl::Status LoadFullModelState(const nn::StateDict& state);
  absl::Status LoadFullOptimizerState(
      const std::vector<optim::StateEntry>& state);
  // The optimizer's learning rate (0 on a zero1/zero2 rank that holds no
  // element; rank 0 always holds some).
  double lr() const;
  // The parameter groups an unsharded optimizer of the whole model would
  // export (Optimizer::ExportParamGroups): under zero1, zero2 and fsdp the
  // groups of the factory's optimizer of the model's parameters, with the
  // local optimizer's current lr. Empty on a rank without a local
  // optimizer.
  std::vector<optim::ParamGroupState> FullParamGroups() const;

 private:
  Strategy(nn::Module& model, comm::Communicator& comm)
      : model_(&model), comm_(&comm) {}
  nn::Module* model_;
  comm::Communicator* comm_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<ZeroRedundancyOptimizer> zero_;
  std::unique_ptr<FullyShardedDataParallel> fsdp_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // local, none and fsdp
  // zero1, zero2, fsdp: the factory's optimizer of the model's parameters,
  // whose param groups the shards follow (never stepped).
  std::unique_ptr<optim::Optimizer> groups_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_STRATEGY_H_
