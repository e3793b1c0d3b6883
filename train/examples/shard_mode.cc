#include "train/examples/shard_mode.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd.h"

namespace tandem::train {

absl::StatusOr<ShardMode> ParseShardMode(std::string_view text) {
  if (text == "none") return ShardMode::kNone;
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
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<ShardedTrainer>> ShardedTrainer::Create(
    ShardMode mode, nn::Sequential& model, comm::Communicator& comm,
    const ShardOptimizerFactory& make_optimizer) {
  std::unique_ptr<ShardedTrainer> t(new ShardedTrainer(model));
  if (mode == ShardMode::kFsdp) {
    TANDEM_ASSIGN_OR_RETURN(t->fsdp_,
                            FullyShardedDataParallel::Create(model, comm));
    TANDEM_ASSIGN_OR_RETURN(t->optimizer_,
                            make_optimizer(t->fsdp_->ShardParameters()));
    return t;
  }
  DdpOptions options;
  options.reduce_scatter_gradients = mode == ShardMode::kZero2;
  TANDEM_ASSIGN_OR_RETURN(
      t->ddp_, DistributedDataParallel::Create(model, comm, options));
  if (mode == ShardMode::kNone) {
    TANDEM_ASSIGN_OR_RETURN(t->optimizer_, make_optimizer(model.Parameters()));
  } else {
    TANDEM_ASSIGN_OR_RETURN(
        t->zero_, ZeroRedundancyOptimizer::Create(*t->ddp_, make_optimizer));
  }
  return t;
}

absl::StatusOr<Tensor> ShardedTrainer::Forward(const Tensor& input) {
  if (fsdp_ != nullptr) return fsdp_->Forward(input);
  if (!IsGradEnabled()) return model_->Forward(input);
  return ddp_->Forward(input);
}

absl::Status ShardedTrainer::Backward(const Tensor& loss) {
  return fsdp_ != nullptr ? fsdp_->Backward(loss) : ddp_->Backward(loss);
}

absl::Status ShardedTrainer::Step() {
  return zero_ != nullptr ? zero_->Step() : optimizer_->Step();
}

void ShardedTrainer::ZeroGrad() {
  if (zero_ != nullptr) {
    zero_->ZeroGrad();
  } else if (fsdp_ != nullptr) {
    optimizer_->ZeroGrad();
  } else {
    model_->ZeroGrad();
  }
}

}  // namespace tandem::train
