#include "train/examples/digits_ddp_lib.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "comm/types.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/sequential.h"
#include "tensor/ops.h"
#include "train/data/data_loader.h"
#include "train/examples/digits_data.h"
#include "train/examples/run_monitor.h"
#include "train/launch/config_agreement.h"
#include "train/loop/evaluate.h"
#include "train/loop/rank_values.h"
#include "train/loop/training_loop.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/strategy.h"

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

// lr and momentum are checked where the optimizer is built (Sgd::Create:
// PyTorch's rules, and finite).
absl::Status CheckConfig(const DigitsConfig& c) {
  // A million epochs is far beyond any use of this example; more is a typo
  // (or INT64_MAX) that would train for ever rather than fail.
  constexpr int64_t kMaxEpochs = 1000000;
  if (c.epochs < 0 || c.epochs > kMaxEpochs || c.global_batch_size < 1 ||
      c.hidden < 1 || !(c.test_fraction > 0 && c.test_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("digits_ddp: bad configuration: epochs=", c.epochs,
                     " global_batch_size=", c.global_batch_size,
                     " hidden=", c.hidden, " test_fraction=", c.test_fraction,
                     " (need 0 <= epochs <= ", kMaxEpochs,
                     ", global_batch_size >= 1, hidden >= 1, "
                     "0 < test_fraction < 1)"));
  }
  return absl::OkStatus();
}

// The per-rank epoch sums a mid-epoch checkpoint carries
// (train/loop/rank_values.h), in the order of RunDigitsDdp's sums: loss *
// samples, samples, correct.
constexpr const char* kEpochSumNames[] = {"sum", "count", "correct"};
constexpr const char* kEpochSumPrefix = "digits.epoch_loss_";

}  // namespace

absl::StatusOr<DigitsResult> RunDigitsDdp(comm::Communicator& comm,
                                          const DigitsConfig& config,
                                          Device device) {
  // First, before any rank can fail alone on its own flags: per-rank flags
  // (mpirun MPMD) would otherwise hang or crash a later collective.
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
      comm, device,
      {{"--epochs", config.epochs},
       {"--global_batch_size", config.global_batch_size},
       {"--lr", config.lr},
       {"--momentum", config.momentum},
       {"--hidden", config.hidden},
       {"--seed", config.seed},
       {"--split_seed", config.split_seed},
       {"--test_fraction", config.test_fraction},
       {"--checkpoint_dir", config.checkpoint.dir},
       {"--checkpoint_every", config.checkpoint.every_steps},
       {"--shard", config.shard},
       {"--amp", config.amp.has_value() ? DTypeName(*config.amp) : "off"}}));
  TANDEM_RETURN_IF_ERROR(CheckConfig(config));
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
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<Strategy> trainer,
      Strategy::Create(shard, *model, comm,
                       SgdFactory(config.lr, {.momentum = config.momentum}),
                       config.amp));
  TrainingLoop loop(comm, *model, *trainer,
                    {.who = "digits_ddp",
                     .epochs = config.epochs,
                     .device = device,
                     .checkpoint = config.checkpoint,
                     .autocast = config.amp});
  TANDEM_RETURN_IF_ERROR(loop.Resume().status());
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

  // Summed over every rank after each epoch: loss * samples, samples, and
  // the samples the model classified right as it trained on them.
  std::vector<double> sums;
  DigitsResult result;
  LoopHooks hooks;
  hooks.begin_epoch = [&](int64_t, int64_t first_step) -> absl::Status {
    sums = {0, 0, 0};
    if (first_step == 0) return absl::OkStatus();
    // Resumed mid-epoch: the sums of the steps already taken.
    TANDEM_ASSIGN_OR_RETURN(
        sums, RankValues(loop.resumed_extra(), "digits_ddp", kEpochSumPrefix,
                         kEpochSumNames, comm.rank()));
    return absl::OkStatus();
  };
  hooks.after_step = [&](const StepView& s) -> absl::Status {
    const int64_t n = s.batch->labels.numel();
    TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                            CountCorrect(s.output, s.batch->labels));
    sums[0] += s.loss * n;
    sums[1] += n;
    sums[2] += static_cast<double>(correct);
    return absl::OkStatus();
  };
  hooks.mid_epoch_extra = [&] {
    return GatherRankValues(comm, device, "digits_ddp", kEpochSumPrefix,
                            kEpochSumNames, sums);
  };
  hooks.end_epoch = [&](int64_t epoch, int64_t) -> absl::StatusOr<EpochEnd> {
    TANDEM_RETURN_IF_ERROR(
        AllReduceF64(comm, device, absl::MakeSpan(sums), comm::ReduceOp::kSum));
    result.final_train_loss = sums[0] / sums[1];
    return EpochEnd{.report = {.train_loss = result.final_train_loss,
                               .train_accuracy = sums[2] / sums[1],
                               .samples = static_cast<int64_t>(sums[1])},
                    .rank0_line = absl::StrFormat(
                        "Epoch: %03d/%03d | Train loss: %.4f", epoch + 1,
                        config.epochs, result.final_train_loss)};
  };
  TANDEM_RETURN_IF_ERROR(loop.Run(train, CrossEntropyLoss(), hooks));

  // Each rank scores a disjoint strided slice of the test set (no padding).
  model->Eval();
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < split->test.size(); i += comm.size()) {
    mine.push_back(i);
  }
  std::vector<double> correct_and_total = {0, static_cast<double>(mine.size())};
  if (!mine.empty()) {
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(split->test, mine, static_cast<int64_t>(mine.size()),
                           /*drop_last=*/false));
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(0));
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, EvalForward(*trainer, batch.features,
                                                       device, config.amp));
    TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                            CountCorrect(logits, batch.labels));
    correct_and_total[0] = static_cast<double>(correct);
  }
  TANDEM_RETURN_IF_ERROR(AllReduceF64(
      comm, device, absl::MakeSpan(correct_and_total), comm::ReduceOp::kSum));
  result.test_correct = static_cast<int64_t>(correct_and_total[0]);
  result.test_total = static_cast<int64_t>(correct_and_total[1]);
  RunMonitor* const monitor = comm.rank() == 0 ? ActiveRunMonitor() : nullptr;
  if (monitor != nullptr) {
    monitor->Test(result.test_accuracy(), result.test_correct,
                  result.test_total);
  }
  out.PrintOnRank0(absl::StrFormat("Test accuracy: %.4f (%d/%d, all ranks)",
                                   result.test_accuracy(), result.test_correct,
                                   result.test_total));
  return result;
}

}  // namespace tandem::train
