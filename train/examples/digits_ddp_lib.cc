#include "train/examples/digits_ddp_lib.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/sequential.h"
#include "train/examples/digits_data.h"
#include "train/examples/rank_flags.h"
#include "train/launch/config_agreement.h"
#include "train/loop/evaluate.h"
#include "train/loop/training_loop.h"

namespace tandem::train {
namespace {

absl::StatusOr<std::unique_ptr<nn::Sequential>> BuildModel(
    const DigitsConfig& c) {
  Generator gen(c.seed);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(64, c.hidden, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(c.hidden, 10, gen)));
  return model;
}

// Each rank takes global_batch_size / world size samples per step; a size
// the world does not divide is refused rather than rounded silently.
absl::Status CheckGlobalBatch(int64_t global_batch_size, int world_size) {
  if (global_batch_size % world_size == 0) return absl::OkStatus();
  const int64_t below = global_batch_size / world_size * world_size;
  const int64_t above = below + world_size;
  return absl::InvalidArgumentError(absl::StrCat(
      "digits_ddp: --global_batch_size=", global_batch_size,
      " is not divisible by ", world_size, " ranks; use ",
      below > 0 ? absl::StrCat(below, " or ") : "", above,
      " (each rank takes global_batch_size / world size samples per step), "
      "or change the number of ranks"));
}

}  // namespace

absl::StatusOr<DigitsResult> RunDigitsDdp(comm::Communicator& comm,
                                          const DigitsConfig& config,
                                          Device device) {
  // First, before any rank can fail alone on its own flags (mpirun MPMD).
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(
      comm, device, "digits_ddp",
      {IntFlag("--epochs", config.epochs, 0, kMaxEpochs),
       IntFlag("--global_batch_size", config.global_batch_size, 1),
       Flag("--lr", config.lr),  // Sgd::Create checks lr and momentum
       Flag("--momentum", config.momentum),
       IntFlag("--hidden", config.hidden, 1), Flag("--seed", config.seed),
       Flag("--split_seed", config.split_seed),
       OpenRangeFlag("--test_fraction", config.test_fraction, 0, 1),
       Flag("--checkpoint_dir", config.checkpoint.dir),
       Flag("--checkpoint_every", config.checkpoint.every_steps),
       Flag("--shard", config.shard),
       Flag("--amp",
            config.amp.has_value() ? DTypeName(*config.amp) : "off")}));
  TANDEM_ASSIGN_OR_RETURN(const ShardMode shard, ParseShardMode(config.shard));
  TANDEM_RETURN_IF_ERROR(CheckShardAmp(shard, config.amp));
  TANDEM_RETURN_IF_ERROR(
      CheckGlobalBatch(config.global_batch_size, comm.size()));
  const comm::RankPrinter out(comm);
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<const DigitsSplit> split,
      LoadDigitsSplit({.data_path = config.data_path,
                       .split_seed = config.split_seed,
                       .test_fraction = config.test_fraction},
                      comm));
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
      comm, device,
      {{"dataset size", split->train.size() + split->test.size()},
       {"dataset hash", HashHex(split->hash)}}));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                          BuildModel(config));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  // The epoch's sums, per rank, summed before end_epoch: loss * samples,
  // samples, and the samples the model classified right as it trained.
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(comm, *model, shard,
                           SgdFactory(config.lr, {.momentum = config.momentum}),
                           {.who = "digits_ddp",
                            .epochs = config.epochs,
                            .device = device,
                            .checkpoint = config.checkpoint,
                            .autocast = config.amp,
                            .epoch_sums = {"loss", "count", "correct"}}));
  TANDEM_RETURN_IF_ERROR(loop->Resume().status());
  const int64_t batch_size = config.global_batch_size / comm.size();
  TANDEM_ASSIGN_OR_RETURN(SampledBatches train,
                          SampledBatches::Create(split->train, comm, batch_size,
                                                 /*drop_last=*/false));
  out.PrintOnRank0(absl::StrFormat(
      "digits_ddp: %d train / %d test samples, %d rank(s) on %s, batch %d per "
      "rank, MLP 64-%d-10%s",
      split->train.size(), split->test.size(), comm.size(),
      std::string(comm.backend()), batch_size, config.hidden,
      shard == ShardMode::kNone ? "" : ", --shard=" + config.shard));
  DigitsResult result;
  LoopHooks hooks;
  hooks.after_step = [&](const StepView& s) -> absl::Status {
    const int64_t n = s.batch->labels.numel();
    TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                            CountCorrect(s.output, s.batch->labels));
    std::vector<double>& sums = *s.sums;
    sums[0] += s.loss * n;
    sums[1] += n;
    sums[2] += static_cast<double>(correct);
    return absl::OkStatus();
  };
  hooks.end_epoch = [&](int64_t epoch, int64_t) -> absl::StatusOr<EpochEnd> {
    const std::vector<double>& sums = loop->epoch_sums();
    result.final_train_loss = sums[0] / sums[1];
    return EpochEnd{.report = {.train_loss = result.final_train_loss,
                               .train_accuracy = sums[2] / sums[1],
                               .samples = static_cast<int64_t>(sums[1])},
                    .rank0_line = absl::StrFormat(
                        "Epoch: %03d/%03d | Train loss: %.4f", epoch + 1,
                        config.epochs, result.final_train_loss)};
  };
  TANDEM_RETURN_IF_ERROR(loop->Run(train, CrossEntropyLoss(), hooks));

  // Each rank scores a disjoint strided slice of the test set (no padding).
  model->Eval();
  TANDEM_ASSIGN_OR_RETURN(
      const Score test,
      StridedScore(comm, loop->strategy(), split->test, device, config.amp));
  result.test_correct = test.correct;
  result.test_total = test.total;
  loop->ReportTest(test);
  out.PrintOnRank0(absl::StrFormat("Test accuracy: %.4f (%d/%d, all ranks)",
                                   result.test_accuracy(), result.test_correct,
                                   result.test_total));
  return result;
}

}  // namespace tandem::train
