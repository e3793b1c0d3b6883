#include "train/examples/toy_ddp_lib.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/py_repr.h"
#include "tensor/nn/sequential.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
#include "train/launch/config_agreement.h"
#include "train/loop/evaluate.h"
#include "train/loop/training_loop.h"
#include "train/parallel/strategy.h"

namespace tandem::train {
namespace {

absl::StatusOr<TensorDataset> MakeDataset(const std::vector<float>& xy,
                                          const std::vector<int64_t>& labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  TANDEM_ASSIGN_OR_RETURN(Tensor features, Tensor::FromVector(xy, {n, 2}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
  return TensorDataset::Create(features, y);
}

// The tutorial's compute_accuracy: correct predictions over the loader's
// batches, through the model in eval mode without grad. PyTorch
// accumulates `correct` in a float32 tensor and divides it by the int count
// in float32; .item() widens that to a Python float. Same here.
absl::StatusOr<float> ComputeAccuracy(Strategy& model, const DataLoader& loader,
                                      const char* which, int rank,
                                      Device device) {
  float correct = 0.f;
  int64_t total_examples = 0;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
    TANDEM_ASSIGN_OR_RETURN(Tensor logits,
                            EvalForward(model, batch.features, device));
    TANDEM_ASSIGN_OR_RETURN(int64_t hits, CountCorrect(logits, batch.labels));
    correct += static_cast<float>(hits);
    total_examples += batch.labels.dim(0);
  }
  if (total_examples == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "toy_ddp on rank ", rank, ": the ", which,
        " accuracy has no examples to average (the PyTorch script raises "
        "ZeroDivisionError here): this rank's shard holds fewer samples than "
        "one batch with drop_last; lower --batch_size or --world_size"));
  }
  return correct / static_cast<float>(total_examples);
}

}  // namespace

// The tutorial's NeuralNetwork: its layers live in a Sequential registered
// as "layers", so the state dict's names are PyTorch's ("layers.0.weight").
class ToyNetwork : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<ToyNetwork>> Create(Generator& gen) {
    auto layers = std::make_unique<nn::Sequential>();
    TANDEM_RETURN_IF_ERROR(layers->Append(nn::Linear::Create(2, 30, gen)));
    TANDEM_RETURN_IF_ERROR(layers->Append(std::make_unique<nn::ReLU>()));
    TANDEM_RETURN_IF_ERROR(layers->Append(nn::Linear::Create(30, 20, gen)));
    TANDEM_RETURN_IF_ERROR(layers->Append(std::make_unique<nn::ReLU>()));
    TANDEM_RETURN_IF_ERROR(layers->Append(nn::Linear::Create(20, 2, gen)));
    auto net = std::unique_ptr<ToyNetwork>(new ToyNetwork());
    TANDEM_ASSIGN_OR_RETURN(net->layers_,
                            net->RegisterModule("layers", std::move(layers)));
    return net;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& input) override {
    return layers_->Forward(input);
  }
  std::string_view type_name() const override { return "NeuralNetwork"; }

 private:
  ToyNetwork() = default;
  nn::Sequential* layers_ = nullptr;  // owned by the Module base
};

absl::StatusOr<std::unique_ptr<nn::Module>> BuildToyModel(Generator& gen) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<ToyNetwork> net,
                          ToyNetwork::Create(gen));
  return std::unique_ptr<nn::Module>(std::move(net));
}

absl::Status RunToyDdp(comm::Communicator& comm, const ToyDdpConfig& config,
                       Device device) {
  // First, before any rank can fail alone on its own flags: per-rank flags
  // (mpirun MPMD) would otherwise hang or crash a later collective.
  TANDEM_RETURN_IF_ERROR(
      CheckRanksAgree(comm, device,
                      {{"--epochs", config.epochs},
                       {"--batch_size", config.batch_size},
                       {"--lr", config.lr},
                       {"--seed", config.seed},
                       {"--loss_precision", config.loss_precision},
                       {"--log_ranks", config.log_all_ranks ? "all" : "0"},
                       {"--checkpoint_dir", config.checkpoint.dir},
                       {"--checkpoint_every", config.checkpoint.every_steps}}));
  // lr is checked where the optimizer is built (Sgd::Create: PyTorch's
  // rule, and finite).
  // A million epochs is far beyond any use of this example; more is a typo
  // (or INT64_MAX) that would train for ever rather than fail.
  constexpr int64_t kMaxEpochs = 1000000;
  if (config.epochs < 0 || config.epochs > kMaxEpochs ||
      config.batch_size < 1 || config.loss_precision < 0 ||
      config.loss_precision > 17) {
    return absl::InvalidArgumentError(
        absl::StrCat("toy_ddp: expected 0 <= epochs <= ", kMaxEpochs,
                     ", batch_size >= 1 and "
                     "0 <= loss_precision <= 17; got epochs = ",
                     config.epochs, ", batch_size = ", config.batch_size,
                     ", loss_precision = ", config.loss_precision));
  }
  const comm::RankPrinter printer(comm);
  auto log = [&](const std::string& text) {
    if (config.log_all_ranks) {
      printer.PrintOnAllRanks(text);
    } else {
      printer.PrintOnRank0(absl::StrCat("[", comm::RankName(0), "] ", text));
    }
  };

  // prepare_dataset()
  TANDEM_ASSIGN_OR_RETURN(TensorDataset train_ds,
                          MakeDataset({-1.2f, 3.1f, -0.9f, 2.9f, -0.5f, 2.6f,
                                       2.3f, -1.1f, 2.7f, -1.5f},
                                      {0, 0, 0, 1, 1}));
  TANDEM_ASSIGN_OR_RETURN(TensorDataset test_ds,
                          MakeDataset({-0.8f, 2.8f, 2.6f, -1.6f}, {0, 1}));
  TANDEM_ASSIGN_OR_RETURN(
      SampledBatches train_data,
      SampledBatches::Create(train_ds, comm, config.batch_size,
                             /*drop_last=*/true));
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader test_loader,
      DataLoader::Sequential(test_ds, config.batch_size, /*drop_last=*/false));

  // torch.manual_seed(seed); model = NeuralNetwork(2, 2); model.to(rank)
  Generator gen(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model,
                          BuildToyModel(gen));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<Strategy> ddp,
      Strategy::Create(ShardMode::kNone, *model, comm, SgdFactory(config.lr)));
  TrainingLoop loop(comm, *model, *ddp,
                    {.who = "toy_ddp",
                     .epochs = config.epochs,
                     .device = device,
                     .checkpoint = config.checkpoint});
  LoopHooks hooks;
  hooks.after_step = [&](const StepView& s) {
    log(absl::StrFormat(
        "Epoch: %03d/%03d | Batchsize %03d | Train/Val Loss: %.*f", s.epoch + 1,
        config.epochs, s.batch->labels.dim(0), config.loss_precision, s.loss));
    return absl::OkStatus();
  };
  hooks.end_epoch = [&](int64_t, int64_t steps) -> absl::StatusOr<EpochEnd> {
    return EpochEnd{
        .report = {.samples = steps * config.batch_size * comm.size()}};
  };
  TANDEM_RETURN_IF_ERROR(loop.Run(train_data, CrossEntropyLoss(), hooks));

  model->Eval();
  // The train loader iterates the last epoch's order (set here too for a run
  // resumed after its last epoch, whose loop did not run).
  TANDEM_RETURN_IF_ERROR(
      train_data.BeginEpoch(std::max<int64_t>(config.epochs - 1, 0)).status());
  TANDEM_ASSIGN_OR_RETURN(const DataLoader* loader, train_data.loader());
  TANDEM_ASSIGN_OR_RETURN(
      float train_acc,
      ComputeAccuracy(*ddp, *loader, "training", comm.rank(), device));
  log(absl::StrCat("Training accuracy ", PythonFloatStr(train_acc)));
  TANDEM_ASSIGN_OR_RETURN(
      float test_acc,
      ComputeAccuracy(*ddp, test_loader, "test", comm.rank(), device));
  log(absl::StrCat("Test accuracy ", PythonFloatStr(test_acc)));
  return absl::OkStatus();
}

std::string PythonFloatStr(double value) { return nn::PyFloatRepr(value); }

}  // namespace tandem::train
