#include "train/examples/toy_ddp_lib.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/autograd.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
#include "train/data/distributed_sampler.h"
#include "train/examples/run_monitor.h"
#include "train/launch/config_agreement.h"
#include "train/parallel/ddp.h"
#include "train/parallel/finite_check.h"

namespace tandem::train {
namespace {

absl::StatusOr<TensorDataset> MakeDataset(const std::vector<float>& xy,
                                          const std::vector<int64_t>& labels) {
  const int64_t n = static_cast<int64_t>(labels.size());
  TANDEM_ASSIGN_OR_RETURN(Tensor features, Tensor::FromVector(xy, {n, 2}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
  return TensorDataset::Create(features, y);
}

// `batch` with its features and labels on `device` (unchanged on the CPU).
absl::StatusOr<Batch> OnDevice(Batch batch, Device device) {
  if (device.is_cpu()) return batch;
  TANDEM_ASSIGN_OR_RETURN(batch.features, batch.features.To(device));
  TANDEM_ASSIGN_OR_RETURN(batch.labels, batch.labels.To(device));
  return batch;
}

// The tutorial's compute_accuracy: correct predictions over the loader's
// batches, through the DDP model in eval mode without grad. PyTorch
// accumulates `correct` in a float32 tensor and divides it by the int count
// in float32; .item() widens that to a Python float. Same here.
absl::StatusOr<float> ComputeAccuracy(DistributedDataParallel& model,
                                      const DataLoader& loader,
                                      const char* which, int rank,
                                      Device device) {
  model.module().Eval();
  float correct = 0.f;
  int64_t total_examples = 0;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
    Tensor features = batch.features;
    if (!device.is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(features, features.To(device));
    }
    Tensor logits;
    {
      NoGradGuard no_grad;
      TANDEM_ASSIGN_OR_RETURN(logits, model.Forward(features));
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor predictions, Argmax(logits, 1));
    if (!device.is_cpu()) {
      TANDEM_ASSIGN_OR_RETURN(predictions, predictions.To(Device::CPU()));
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> p,
                            predictions.ToVector<int64_t>());
    TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> y,
                            batch.labels.ToVector<int64_t>());
    int64_t hits = 0;
    for (size_t i = 0; i < p.size(); ++i) hits += p[i] == y[i] ? 1 : 0;
    correct += static_cast<float>(hits);
    total_examples += static_cast<int64_t>(p.size());
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
  const int rank = comm.rank();
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
  DistributedSamplerOptions sampler_options;
  sampler_options.num_replicas = comm.size();
  sampler_options.rank = rank;  // shuffle = true, seed = 0: the defaults
  TANDEM_ASSIGN_OR_RETURN(
      DistributedSampler sampler,
      DistributedSampler::Create(train_ds.size(), sampler_options));
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader test_loader,
      DataLoader::Sequential(test_ds, config.batch_size, /*drop_last=*/false));

  // torch.manual_seed(seed); model = NeuralNetwork(2, 2)
  Generator gen(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model,
                          BuildToyModel(gen));
  TANDEM_RETURN_IF_ERROR(model->To(device));  // model.to(rank)
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd optimizer,
                          optim::Sgd::Create(model->Parameters(), config.lr));
  // Resume (every rank) before DDP broadcasts rank 0's parameters.
  checkpoint::RunCheckpointer checkpointer(config.checkpoint, comm, device,
                                           "toy_ddp");
  checkpoint::TrainingState state;
  state.model = model.get();
  state.optimizer = &optimizer;
  TANDEM_ASSIGN_OR_RETURN(checkpoint::TrainingProgress start,
                          checkpointer.Resume(state));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DistributedDataParallel> ddp,
                          DistributedDataParallel::Create(*model, comm));

  auto train_loader = [&]() {
    return DataLoader::Create(train_ds, sampler.Indices(), config.batch_size,
                              /*drop_last=*/true);
  };
  RunMonitor* const monitor = rank == 0 ? ActiveRunMonitor() : nullptr;
  for (int64_t epoch = start.epoch; epoch < config.epochs; ++epoch) {
    sampler.SetEpoch(epoch);
    model->Train();
    TANDEM_ASSIGN_OR_RETURN(DataLoader loader, train_loader());
    for (int64_t b = epoch == start.epoch ? start.step_in_epoch : 0;
         b < loader.num_batches(); ++b) {
      TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
      TANDEM_ASSIGN_OR_RETURN(batch, OnDevice(std::move(batch), device));
      TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(batch.features));
      TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, batch.labels));
      optimizer.ZeroGrad();
      TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
      TANDEM_RETURN_IF_ERROR(optimizer.Step());
      TANDEM_ASSIGN_OR_RETURN(double loss_value, loss.Item());
      log(absl::StrFormat(
          "Epoch: %03d/%03d | Batchsize %03d | Train/Val Loss: %.*f", epoch + 1,
          config.epochs, batch.labels.dim(0), config.loss_precision,
          loss_value));
      if (monitor != nullptr) {
        ReportStep(*monitor, *ddp,
                   {.epoch = epoch,
                    .epochs = config.epochs,
                    .step = b,
                    .steps_per_epoch = loader.num_batches(),
                    .samples = batch.labels.dim(0) * comm.size(),
                    .loss = loss_value});
      }
      // Every rank stops together on a non-finite loss (every step) or
      // parameter (scanned every kParameterCheckInterval steps and at the
      // end of the epoch).
      TANDEM_RETURN_IF_ERROR(
          CheckStepFinite(
              comm, *model,
              {.epoch = epoch,
               .step = b,
               .loss = loss_value,
               .check_parameters = ParameterCheckDue(b, loader.num_batches())})
              .status());
      TANDEM_RETURN_IF_ERROR(
          checkpointer.AfterStep(state, epoch, b, loader.num_batches()));
    }
    if (monitor != nullptr) {
      monitor->Epoch(
          {.epoch = epoch,
           .epochs = config.epochs,
           .samples = loader.num_batches() * config.batch_size * comm.size()});
    }
  }

  model->Eval();
  // The train loader iterates the last epoch's order (set here too for a run
  // resumed after its last epoch, whose loop did not run).
  sampler.SetEpoch(std::max<int64_t>(config.epochs - 1, 0));
  TANDEM_ASSIGN_OR_RETURN(DataLoader loader, train_loader());
  TANDEM_ASSIGN_OR_RETURN(
      float train_acc, ComputeAccuracy(*ddp, loader, "training", rank, device));
  log(absl::StrCat("Training accuracy ", PythonFloatStr(train_acc)));
  TANDEM_ASSIGN_OR_RETURN(
      float test_acc, ComputeAccuracy(*ddp, test_loader, "test", rank, device));
  log(absl::StrCat("Test accuracy ", PythonFloatStr(test_acc)));
  return absl::OkStatus();
}

std::string PythonFloatStr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, as d.ddde[+-]x.
  char buf[64];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value,
                                               std::chars_format::scientific);
  if (r.ec != std::errc()) return "nan";  // cannot happen with 64 bytes
  const std::string sci(buf, r.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;  // significant digits without the point
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }

  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    return absl::StrFormat("%se%c%02d", out, exponent < 0 ? '-' : '+',
                           std::abs(exponent));
  }
  // Fixed notation: the point goes after digit `exponent` (0-based).
  std::string out;
  if (exponent < 0) {
    out = "0." + std::string(-exponent - 1, '0') + digits;
  } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
    out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
  }
  return sign + out;
}

}  // namespace tandem::train
