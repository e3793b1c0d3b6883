#include "train/examples/toy_ddp/toy_ddp_lib.h"

#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "tensor/nn/mlp.h"
#include "tensor/nn/wrapper.h"
#include "train/data/vector_dataset.h"
#include "train/examples/runner/rank_flags.h"
#include "train/loop/classifier.h"
#include "train/loop/must_match.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

absl::StatusOr<std::unique_ptr<nn::Module>> BuildToyModel(Generator& gen) {
  // The tutorial's NeuralNetwork keeps its MLP as `self.layers`.
  return nn::Wrapper::Create("NeuralNetwork", "layers",
                             nn::Mlp({2, 30, 20, 2}, gen));
}

absl::Status RunToyDdp(comm::Communicator& comm, const ToyDdpConfig& config,
                       Device device) {
  // First, before any rank can fail alone on its own flags (mpirun MPMD).
  const std::vector<RankFlag> flags =
      WithCheckpointFlags(config.RankFlags(), config.checkpoint);
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(comm, device, "toy_ddp", flags));
  TANDEM_ASSIGN_OR_RETURN(TensorDataset train_ds,
                          VectorDataset({-1.2f, 3.1f, -0.9f, 2.9f, -0.5f, 2.6f,
                                         2.3f, -1.1f, 2.7f, -1.5f},
                                        2, {0, 0, 0, 1, 1}));
  TANDEM_ASSIGN_OR_RETURN(TensorDataset test_ds,
                          VectorDataset({-0.8f, 2.8f, 2.6f, -1.6f}, 2, {0, 1}));
  TANDEM_ASSIGN_OR_RETURN(
      SampledBatches train_data,
      SampledBatches::Create(train_ds, comm, config.batch_size, true,
                             config.virtual_world));
  // torch.manual_seed(seed); model = NeuralNetwork(2, 2); model.to(rank)
  Generator gen(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model,
                          BuildToyModel(gen));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(comm, *model, ShardMode::kNone,
                           SgdFactory(config.lr),
                           {.who = "toy_ddp",
                            .epochs = config.epochs,
                            .device = device,
                            .checkpoint = config.checkpoint,
                            .must_match = MustMatchOnResume(Entries(flags)),
                            .virtual_world = config.virtual_world}));
  // "[GPUk] text" for rank k (a virtual rank under --virtual_world).
  auto log = [&](int64_t rank, const std::string& text) {
    if (config.log_ranks == "0" && rank != 0) return absl::OkStatus();
    return loop->printer().PrintOnRank(rank, text);
  };
  const int64_t replicas =
      config.virtual_world > 0 ? config.virtual_world : comm.size();
  LoopHooks hooks;
  hooks.after_step = [&](const StepView& s) {
    return log(s.rank,
               absl::StrFormat(
                   "Epoch: %03d/%03d | Batchsize %03d | Train/Val Loss: %.*f",
                   s.epoch + 1, config.epochs, s.batch->labels.dim(0),
                   config.loss_precision, s.loss));
  };
  hooks.end_epoch = [&](int64_t, int64_t steps) -> absl::StatusOr<EpochEnd> {
    return EpochEnd{
        .report = {.samples = steps * config.batch_size * replicas}};
  };
  TANDEM_RETURN_IF_ERROR(loop->Run(train_data, CrossEntropyLoss(), hooks));
  // "Training accuracy 1.0" (the last epoch's order), "Test accuracy 1.0".
  return PrintTutorialAccuracies(*loop, train_data, test_ds, log);
}

}  // namespace tandem::train
