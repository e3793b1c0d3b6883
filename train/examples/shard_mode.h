// The examples' --shard flag: how a data-parallel example keeps its model,
// gradients and optimizer state across ranks.
//
//   none   DistributedDataParallel + the optimizer on every rank
//   zero1  DDP + ZeroRedundancyOptimizer: optimizer state sharded
//   zero2  DDP reduce-scattering its buckets + ZeroRedundancyOptimizer
//   fsdp   FullyShardedDataParallel (one unit per layer), optimizer on the
//          parameter shards
//
// All four give the same weights bit for bit (train/parallel's tests), so
// an example reaches the same loss and accuracy whatever the mode.
//
//   TANDEM_ASSIGN_OR_RETURN(ShardMode mode, ParseShardMode(flag));
//   TANDEM_ASSIGN_OR_RETURN(auto trainer,
//                           ShardedTrainer::Create(mode, *model, comm, make));
//   trainer->ZeroGrad();
//   TANDEM_ASSIGN_OR_RETURN(Tensor logits, trainer->Forward(x));
//   ... loss ...
//   TANDEM_RETURN_IF_ERROR(trainer->Backward(loss));
//   TANDEM_RETURN_IF_ERROR(trainer->Step());
//
// Collective like the wrappers it holds; belongs to the rank's thread; the
// model and communicator outlive it.
#ifndef TANDEM_TRAIN_EXAMPLES_SHARD_MODE_H_
#define TANDEM_TRAIN_EXAMPLES_SHARD_MODE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/nn/sequential.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp.h"
#include "train/parallel/fsdp.h"
#include "train/parallel/zero_optimizer.h"

namespace tandem::train {

enum class ShardMode { kNone, kZero1, kZero2, kFsdp };

// "none", "zero1", "zero2", "fsdp"; InvalidArgument naming the choices.
absl::StatusOr<ShardMode> ParseShardMode(std::string_view text);
std::string ShardModeName(ShardMode mode);

class ShardedTrainer {
 public:
  // `make_optimizer` builds the optimizer of the tensors it is given: the
  // model's parameters (none), the rank's shards (zero1, zero2, fsdp).
  static absl::StatusOr<std::unique_ptr<ShardedTrainer>> Create(
      ShardMode mode, nn::Sequential& model, comm::Communicator& comm,
      const ShardOptimizerFactory& make_optimizer);

  // In grad mode a training step's forward; under NoGradGuard evaluation
  // (FSDP gathers and frees each unit; the others run the model).
  absl::StatusOr<Tensor> Forward(const Tensor& input);
  absl::Status Backward(const Tensor& loss);
  absl::Status Step();
  void ZeroGrad();
  // Whether the model's parameters hold their values between steps (false
  // under fsdp: read them through fsdp()->FullStateDict()).
  bool parameters_resident() const { return fsdp_ == nullptr; }
  FullyShardedDataParallel* fsdp() const { return fsdp_.get(); }
  // DDP under none, zero1 and zero2 (its last_sync_stats feed the progress
  // line); nullptr under fsdp.
  const DistributedDataParallel* ddp() const { return ddp_.get(); }
  // The optimizer of the whole model under none (what a checkpoint saves);
  // nullptr where it holds only this rank's shards.
  optim::Optimizer* full_optimizer() const {
    return zero_ == nullptr && fsdp_ == nullptr ? optimizer_.get() : nullptr;
  }

 private:
  ShardedTrainer(nn::Sequential& model) : model_(&model) {}

  nn::Sequential* model_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<ZeroRedundancyOptimizer> zero_;
  std::unique_ptr<FullyShardedDataParallel> fsdp_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // none and fsdp
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_SHARD_MODE_H_
