#include "train/examples/digits_ddp/digits_ddp_lib.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tensor/nn/mlp.h"
#include "train/data/datasets/digits.h"
#include "train/examples/runner/rank_flags.h"
#include "train/loop/classifier.h"
#include "train/loop/must_match.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

absl::StatusOr<DigitsResult> RunDigitsDdp(comm::Communicator& comm,
                                          const DigitsConfig& config,
                                          Device device) {
  // First, before any rank can fail alone on its own flags (mpirun MPMD).
  // The entries that are not options follow --seed, where the checkpoints
  // already written record them.
  std::vector<RankFlag> flags = config.RankFlags();
  flags.insert(
      std::find_if(flags.begin(), flags.end(),
                   [](const RankFlag& f) { return f.entry.name == "--seed"; }) +
          1,
      {Flag("--split_seed", config.split_seed),
       RealFlag("--test_fraction", config.test_fraction, 0, 1, true, true),
       Flag("--checkpoint_dir", config.checkpoint.dir),
       Flag("--checkpoint_every", config.checkpoint.every_steps)});
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(comm, device, "digits_ddp", flags));
  TANDEM_ASSIGN_OR_RETURN(const ShardMode shard, ParseShardMode(config.shard));
  TANDEM_RETURN_IF_ERROR(CheckShardAmp(shard, AutocastDType(config.amp)));
  TANDEM_ASSIGN_OR_RETURN(const int64_t batch_size,
                          PerRankBatch("digits_ddp", config.global_batch_size,
                                       comm.size(), config.virtual_world));
  TANDEM_ASSIGN_OR_RETURN(
      std::shared_ptr<const DigitsSplit> split,
      LoadDigitsSplit({.data_path = config.data,
                       .split_seed = config.split_seed,
                       .test_fraction = config.test_fraction},
                      comm, device));
  // A resume must be this run's: these flags and this data set.
  std::vector<ConfigEntry> identity = Entries(flags);
  identity.emplace_back("dataset hash", HashHex(split->hash));
  Generator gen(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                          nn::Mlp({64, config.hidden, 10}, gen));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(comm, *model, shard,
                           SgdFactory(config.lr, {.momentum = config.momentum}),
                           {.who = "digits_ddp",
                            .epochs = config.epochs,
                            .device = device,
                            .checkpoint = config.checkpoint,
                            .autocast = AutocastDType(config.amp),
                            .epoch_sums = ClassifierSums(),
                            .must_match = MustMatchOnResume(identity),
                            .virtual_world = config.virtual_world}));
  TANDEM_RETURN_IF_ERROR(loop->Resume().status());
  TANDEM_ASSIGN_OR_RETURN(
      SampledBatches train,
      SampledBatches::Create(split->train, comm, batch_size,
                             /*drop_last=*/false, config.virtual_world));
  loop->printer().PrintOnRank0(absl::StrFormat(
      "digits_ddp: %d train / %d test samples, %s, batch %d per rank, MLP "
      "64-%d-10%s",
      split->train.size(), split->test.size(),
      WorldDescription(comm, config.virtual_world), batch_size, config.hidden,
      shard == ShardMode::kNone ? "" : ", --shard=" + config.shard));
  DigitsResult result;
  LoopHooks hooks;
  hooks.after_step = AddClassifierSums;
  hooks.end_epoch = [&](int64_t epoch, int64_t) -> absl::StatusOr<EpochEnd> {
    const EpochReport report = ClassifierEpochReport(loop->epoch_sums());
    result.final_train_loss = report.train_loss;
    return EpochEnd{.report = report,
                    .rank0_line = absl::StrFormat(
                        "Epoch: %03d/%03d | Train loss: %.4f", epoch + 1,
                        config.epochs, result.final_train_loss)};
  };
  TANDEM_RETURN_IF_ERROR(loop->Run(train, CrossEntropyLoss(), hooks));

  // Each rank scores a disjoint strided slice of the test set (no padding).
  TANDEM_ASSIGN_OR_RETURN(const Score test, HeldOutScore(*loop, split->test));
  result.test_correct = test.correct;
  result.test_total = test.total;
  loop->printer().PrintOnRank0(absl::StrFormat(
      "Test accuracy: %.4f (%d/%d, all ranks)", result.test_accuracy(),
      result.test_correct, result.test_total));
  return result;
}

}  // namespace tandem::train
