#include "train/examples/toy_ddp_lib.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/py_repr.h"
#include "tensor/nn/sequential.h"
#include "train/examples/rank_flags.h"
#include "train/loop/evaluate.h"
#include "train/loop/training_loop.h"

namespace tandem::train {
namespace {

absl::StatusOr<TensorDataset> MakeDataset(const std::vector<float>& xy,
                                          const std::vector<int64_t>& labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  TANDEM_ASSIGN_OR_RETURN(Tensor features, Tensor::FromVector(xy, {n, 2}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
  return TensorDataset::Create(features, y);
}

// The tutorial's NeuralNetwork: its layers live in a Sequential registered
// as "layers", so the state dict's names are PyTorch's ("layers.0.weight").
class ToyNetwork : public nn::Module {
 public:
  absl::Status Init(Generator& gen) {
    auto layers = std::make_unique<nn::Sequential>();
    TANDEM_RETURN_IF_ERROR(layers->Append(nn::Linear::Create(2, 30, gen)));
    TANDEM_RETURN_IF_ERROR(layers->Append(std::make_unique<nn::ReLU>()));
    TANDEM_RETURN_IF_ERROR(layers->Append(nn::Linear::Create(30, 20, gen)));
    TANDEM_RETURN_IF_ERROR(layers->Append(std::make_unique<nn::ReLU>()));
    TANDEM_RETURN_IF_ERROR(layers->Append(nn::Linear::Create(20, 2, gen)));
    TANDEM_ASSIGN_OR_RETURN(layers_,
                            RegisterModule("layers", std::move(layers)));
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> Forward(const Tensor& input) override {
    return layers_->Forward(input);
  }
  std::string_view type_name() const override { return "NeuralNetwork"; }

 private:
  nn::Sequential* layers_ = nullptr;  // owned by the Module base
};

}  // namespace

absl::StatusOr<std::unique_ptr<nn::Module>> BuildToyModel(Generator& gen) {
  auto net = std::make_unique<ToyNetwork>();
  TANDEM_RETURN_IF_ERROR(net->Init(gen));
  return std::unique_ptr<nn::Module>(std::move(net));
}

absl::Status RunToyDdp(comm::Communicator& comm, const ToyDdpConfig& config,
                       Device device) {
  // First, before any rank can fail alone on its own flags (mpirun MPMD).
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(
      comm, device, "toy_ddp",
      {IntFlag("--epochs", config.epochs, 0, kMaxEpochs),
       IntFlag("--batch_size", config.batch_size, 1),
       Flag("--lr", config.lr),  // Sgd::Create checks it
       Flag("--seed", config.seed),
       IntFlag("--loss_precision", config.loss_precision, 0, 17),
       Flag("--log_ranks", config.log_all_ranks ? "all" : "0"),
       Flag("--checkpoint_dir", config.checkpoint.dir),
       Flag("--checkpoint_every", config.checkpoint.every_steps)}));
  const comm::RankPrinter printer(comm);
  auto log = [&](const std::string& text) {
    if (config.log_all_ranks) return printer.PrintOnAllRanks(text);
    printer.PrintOnRank0(absl::StrCat("[", comm::RankName(0), "] ", text));
  };
  TANDEM_ASSIGN_OR_RETURN(TensorDataset train_ds,
                          MakeDataset({-1.2f, 3.1f, -0.9f, 2.9f, -0.5f, 2.6f,
                                       2.3f, -1.1f, 2.7f, -1.5f},
                                      {0, 0, 0, 1, 1}));
  TANDEM_ASSIGN_OR_RETURN(TensorDataset test_ds,
                          MakeDataset({-0.8f, 2.8f, 2.6f, -1.6f}, {0, 1}));
  TANDEM_ASSIGN_OR_RETURN(
      SampledBatches train_data,
      SampledBatches::Create(train_ds, comm, config.batch_size, true));
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
                            .checkpoint = config.checkpoint}));
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
  TANDEM_RETURN_IF_ERROR(loop->Run(train_data, CrossEntropyLoss(), hooks));

  // The training accuracy over the last epoch's order (set again for a run
  // resumed after its last epoch), then the test accuracy.
  model->Eval();
  TANDEM_RETURN_IF_ERROR(
      train_data.BeginEpoch(std::max<int64_t>(config.epochs - 1, 0)).status());
  TANDEM_ASSIGN_OR_RETURN(const DataLoader* train_loader, train_data.loader());
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader test_loader,
      DataLoader::Sequential(test_ds, config.batch_size, /*drop_last=*/false));
  for (auto [which, loader] :
       {std::pair<std::string, const DataLoader*>{"Training", train_loader},
        {"Test", &test_loader}}) {
    TANDEM_ASSIGN_OR_RETURN(
        const float accuracy,
        LoaderAccuracy(
            loop->strategy(), *loader, device,
            absl::StrCat("toy_ddp on rank ", comm.rank(), ": the ",
                         absl::AsciiStrToLower(which),
                         " accuracy has no examples to average (the PyTorch "
                         "script raises ZeroDivisionError here): this rank's "
                         "shard holds fewer samples than one batch with "
                         "drop_last; lower --batch_size or --world_size")));
    log(absl::StrCat(which, " accuracy ", PythonFloatStr(accuracy)));
  }
  return absl::OkStatus();
}

std::string PythonFloatStr(double value) { return nn::PyFloatRepr(value); }

}  // namespace tandem::train
