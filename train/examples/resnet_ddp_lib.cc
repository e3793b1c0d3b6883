#include "train/examples/resnet_ddp_lib.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "comm/types.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/models/resnet.h"
#include "tensor/ops.h"
#include "tensor/optim/lr_scheduler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/checkpoint/safetensors.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/data_loader.h"
#include "train/data/distributed_sampler.h"
#include "train/launch/config_agreement.h"
#include "train/loop/run_monitor.h"
#include "train/parallel/ddp.h"
#include "train/parallel/finite_check.h"
#include "train/parallel/staged_all_gather.h"
#include "train/parallel/sync_batch_norm.h"

namespace tandem::train {
namespace {

constexpr char kSchedulerPrefix[] = "lr_scheduler.";
// A mid-epoch checkpoint's running sums of the epoch (loss * samples,
// samples), summed over the ranks, as the doubles' bits.
constexpr char kEpochSumsKey[] = "resnet_ddp.epoch_sums_bits";

absl::StatusOr<std::unique_ptr<nn::ResNet>> BuildModel(const std::string& arch,
                                                       int64_t num_classes,
                                                       uint64_t seed,
                                                       DType dtype) {
  Generator gen(seed);
  const nn::ResNetOptions options{.dtype = dtype};
  if (arch == "resnet18") return nn::Resnet18(num_classes, gen, options);
  if (arch == "resnet34") return nn::Resnet34(num_classes, gen, options);
  if (arch == "resnet50") return nn::Resnet50(num_classes, gen, options);
  return absl::InvalidArgumentError(
      absl::StrCat("resnet_ddp: --arch=", arch,
                   "; expected resnet18, resnet34 or resnet50"));
}

absl::StatusOr<std::unique_ptr<optim::LrScheduler>> MakeScheduler(
    const ResnetConfig& c, optim::Optimizer* optimizer) {
  if (c.lr_schedule == "cosine") {
    TANDEM_ASSIGN_OR_RETURN(
        auto s, optim::CosineAnnealingLR::Create(optimizer, c.epochs));
    return std::unique_ptr<optim::LrScheduler>(std::move(s));
  }
  TANDEM_ASSIGN_OR_RETURN(
      auto s, optim::StepLR::Create(optimizer, c.lr_step_epochs, 0.1));
  return std::unique_ptr<optim::LrScheduler>(std::move(s));
}

// Sums `values` over every rank, in place (staged through `device`).
absl::Status AllReduceSum(comm::Communicator& comm, std::vector<double>& values,
                          Device device) {
  return AllReduceF64(comm, device, absl::MakeSpan(values),
                      comm::ReduceOp::kSum);
}

std::string DoublesToBits(const std::vector<double>& values) {
  std::string out;
  for (double v : values) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    absl::StrAppend(&out, out.empty() ? "" : ",", bits);
  }
  return out;
}

absl::StatusOr<std::vector<double>> DoublesFromBits(const std::string& text,
                                                    size_t count) {
  std::vector<double> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t bits = 0;
    if (!absl::SimpleAtoi(part, &bits)) break;
    double v;
    std::memcpy(&v, &bits, sizeof(v));
    out.push_back(v);
  }
  if (out.size() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("resnet_ddp: the checkpoint's \"", kEpochSumsKey,
                     "\" is \"", text, "\", expected ", count,
                     " integers; start from a fresh --checkpoint_dir"));
  }
  return out;
}

// The scheduler's entries of a checkpoint's extra metadata.
std::map<std::string, std::string> SchedulerState(
    const checkpoint::Metadata& extra) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : extra) {
    if (absl::StartsWith(key, kSchedulerPrefix)) {
      out[key.substr(sizeof(kSchedulerPrefix) - 1)] = value;
    }
  }
  return out;
}

// `t` (a CPU float32 batch) in the model's dtype on `device`.
absl::StatusOr<Tensor> ToModel(const Tensor& t, DType dtype, Device device) {
  Tensor x = t;
  if (x.dtype() != dtype) {
    TANDEM_ASSIGN_OR_RETURN(x, x.To(dtype));
  }
  if (x.device() != device) {
    TANDEM_ASSIGN_OR_RETURN(x, x.To(device));
  }
  return x;
}

// The generator a rank's epoch draws its augmentations from: a function of
// the seed, the epoch and the rank only, so a resumed epoch draws the same.
Generator EpochGenerator(uint64_t seed, int64_t epoch, int rank) {
  return Generator(seed * 1000003 + static_cast<uint64_t>(epoch) * 7919 +
                   static_cast<uint64_t>(rank) * 104729 + 17);
}

int64_t CountCorrect(const Tensor& logits, const Tensor& labels) {
  absl::StatusOr<Tensor> predicted = Argmax(logits, -1);
  if (!predicted.ok()) return -1;
  absl::StatusOr<Tensor> host = predicted->To(Device::CPU());
  if (!host.ok()) return -1;
  const int64_t* p = host->data<int64_t>();
  const int64_t* y = labels.data<int64_t>();
  int64_t correct = 0;
  for (int64_t i = 0; i < labels.numel(); ++i) correct += p[i] == y[i];
  return correct;
}

}  // namespace

absl::Status CheckResnetConfig(const ResnetConfig& c) {
  if (c.arch != "resnet18" && c.arch != "resnet34" && c.arch != "resnet50") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--arch=", c.arch, "; expected resnet18, resnet34 or resnet50"));
  }
  if (c.lr_schedule != "step" && c.lr_schedule != "cosine") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lr_schedule=", c.lr_schedule, "; expected step or cosine"));
  }
  constexpr int64_t kMaxEpochs = 1000000;
  if (c.batch_size < 1 || c.batch_size > 65536 || c.epochs < 1 ||
      c.epochs > kMaxEpochs || c.max_steps < 0 || c.lr_step_epochs < 1 ||
      c.num_workers < 0 || c.num_workers > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batch_size=", c.batch_size, " --epochs=", c.epochs,
        " --max_steps=", c.max_steps, " --lr_step_epochs=", c.lr_step_epochs,
        " --num_workers=", c.num_workers,
        "; need 1 <= batch_size <= 65536, 1 <= epochs <= ", kMaxEpochs,
        ", max_steps >= 0 (0: no limit), lr_step_epochs >= 1, "
        "0 <= num_workers <= 1024"));
  }
  if (c.data.image_size < 1 || c.data.image_size > 4096 ||
      c.data.num_classes < 0 || c.data.num_classes > 100000 ||
      c.data.synthetic_size < 1 || c.data.synthetic_size > 1000000 ||
      !(c.data.val_fraction > 0 && c.data.val_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--image_size=", c.data.image_size, " --num_classes=",
        c.data.num_classes, " --synthetic_size=", c.data.synthetic_size,
        " --val_fraction=", c.data.val_fraction,
        "; need 1 <= image_size <= 4096, 0 <= num_classes <= 100000 (0: "
        "from the data), 1 <= synthetic_size <= 1000000, "
        "0 < val_fraction < 1"));
  }
  if (c.data.data != "synthetic") {
    std::error_code error;
    if (!std::filesystem::is_directory(c.data.data, error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data=", c.data.data,
          " is not a folder; pass an image folder (one sub-folder of images "
          "per class, or train/ and val/ holding such folders) or "
          "--data=synthetic"));
    }
  }
  if (c.dtype != DType::kF32 && c.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", DTypeName(c.dtype), "; expected f32 or f64"));
  }
  if (c.amp.has_value()) {
    if (*c.amp != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--amp=", DTypeName(*c.amp),
          "; resnet_ddp takes --amp=bf16 or off (f16 needs a GradScaler, "
          "which resnet_ddp does not run)"));
    }
    if (c.dtype != DType::kF32) {
      return absl::InvalidArgumentError(
          "--amp=bf16 with --dtype=f64; autocast lowers f32 models only: "
          "drop one of them");
    }
  }
  return optim::Sgd::CheckHyperParameters(
      c.lr, {.momentum = c.momentum, .weight_decay = c.weight_decay});
}

absl::StatusOr<ResnetResult> RunResnetDdp(comm::Communicator& comm,
                                          const ResnetConfig& config,
                                          Device device) {
  const int rank = comm.rank();
  const int64_t world = comm.size();
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
      comm, device,
      {ConfigEntry("--arch", config.arch),
       ConfigEntry("--data", config.data.data),
       ConfigEntry("--image_size", config.data.image_size),
       ConfigEntry("--num_classes", config.data.num_classes),
       ConfigEntry("--synthetic_size", config.data.synthetic_size),
       ConfigEntry("--val_fraction", config.data.val_fraction),
       ConfigEntry("--seed", config.data.seed),
       ConfigEntry("--batch_size", config.batch_size),
       ConfigEntry("--epochs", config.epochs),
       ConfigEntry("--max_steps", config.max_steps),
       ConfigEntry("--lr", config.lr),
       ConfigEntry("--lr_schedule", config.lr_schedule),
       ConfigEntry("--lr_step_epochs", config.lr_step_epochs),
       ConfigEntry("--sync_bn", config.sync_bn ? "true" : "false"),
       ConfigEntry("--dtype", DTypeName(config.dtype)),
       ConfigEntry("--amp",
                   config.amp.has_value() ? DTypeName(*config.amp) : "off"),
       ConfigEntry("--checkpoint_dir", config.checkpoint.dir),
       ConfigEntry("--checkpoint_every", config.checkpoint.every_steps)}));
  if (absl::Status s = CheckResnetConfig(config); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resnet_ddp: ", s.message()));
  }
  if (config.amp.has_value()) {
    TANDEM_RETURN_IF_ERROR(amp::Autocast::Check(device.type(), *config.amp));
  }
  TANDEM_ASSIGN_OR_RETURN(ResnetData data, LoadResnetData(config.data));
  const int64_t train_size = static_cast<int64_t>(data.train_indices.size());
  const int64_t val_size = static_cast<int64_t>(data.val_indices.size());
  if (val_size < world ||
      (train_size + world - 1) / world < config.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resnet_ddp: ", train_size, " training and ", val_size,
        " held-out images for ", world,
        " rank(s) with --batch_size=", config.batch_size,
        "; each rank needs one full batch and one "
        "held-out image: add images, lower --batch_size or use fewer ranks"));
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::ResNet> model,
                          BuildModel(config.arch, data.num_classes,
                                     config.data.seed, config.dtype));
  if (config.sync_bn) {
    TANDEM_RETURN_IF_ERROR(ConvertSyncBatchNorm(*model, comm).status());
  }
  TANDEM_RETURN_IF_ERROR(model->To(device));
  model->Train();
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<DistributedDataParallel> ddp,
      DistributedDataParallel::Create(*model, comm, DdpOptions()));
  TANDEM_ASSIGN_OR_RETURN(
      optim::Sgd sgd,
      optim::Sgd::Create(
          model->Parameters(), config.lr,
          {.momentum = config.momentum, .weight_decay = config.weight_decay}));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<optim::LrScheduler> scheduler,
                          MakeScheduler(config, &sgd));
  if (!config.save_init.empty() && rank == 0) {
    TANDEM_RETURN_IF_ERROR(
        checkpoint::SaveSafetensors(config.save_init, model->StateDict()));
  }
  const comm::RankPrinter out(comm);
  checkpoint::RunCheckpointer checkpointer(config.checkpoint, comm, device,
                                           "resnet_ddp");
  checkpoint::TrainingState state;
  state.model = model.get();
  state.optimizer = &sgd;
  TANDEM_ASSIGN_OR_RETURN(checkpoint::TrainingProgress start,
                          checkpointer.Resume(state));
  if (start.global_step > 0) {
    TANDEM_RETURN_IF_ERROR(
        scheduler->LoadStateDict(SchedulerState(state.extra)));
  }
  out.PrintOnRank0(absl::StrFormat(
      "resnet_ddp: %s, %d rank(s) on %s, batch %d per rank, %s%s%s, %s",
      config.arch, world, std::string(comm.backend()), config.batch_size,
      DTypeName(config.dtype), config.amp.has_value() ? ", autocast bf16" : "",
      config.sync_bn ? ", SyncBatchNorm" : "", data.description));

  TANDEM_ASSIGN_OR_RETURN(
      DistributedSampler sampler,
      DistributedSampler::Create(
          train_size,
          {.num_replicas = world, .rank = rank, .seed = config.data.seed}));
  RunMonitor* const monitor = rank == 0 ? ActiveRunMonitor() : nullptr;
  ResnetResult result;
  int64_t global_step = start.global_step;
  auto limit_reached = [&] {
    return config.max_steps > 0 && global_step >= config.max_steps;
  };
  for (int64_t epoch = start.epoch; epoch < config.epochs && !limit_reached();
       ++epoch) {
    sampler.SetEpoch(epoch);
    std::vector<int64_t> indices = sampler.Indices();
    for (int64_t& i : indices) i = data.train_indices[static_cast<size_t>(i)];
    Generator augment = EpochGenerator(config.data.seed, epoch, rank);
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data.train, std::move(indices), config.batch_size,
                           /*drop_last=*/true, augment,
                           {.num_workers = config.num_workers}));
    const int64_t steps = loader.num_batches();
    // loss * samples and samples, this rank's (after a mid-epoch resume,
    // rank 0 starts from every rank's sums of the steps already taken).
    std::vector<double> sums = {0, 0};
    const int64_t first_step = epoch == start.epoch ? start.step_in_epoch : 0;
    if (first_step > 0 && rank == 0) {
      auto it = state.extra.find(kEpochSumsKey);
      if (it == state.extra.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("resnet_ddp: the checkpoint resumes inside epoch ",
                         epoch + 1, " but has no \"", kEpochSumsKey,
                         "\"; start from a fresh --checkpoint_dir"));
      }
      TANDEM_ASSIGN_OR_RETURN(sums, DoublesFromBits(it->second, 2));
    }
    model->Train();
    const absl::Time epoch_start = absl::Now();
    int64_t images = 0;
    for (int64_t b = first_step; b < steps && !limit_reached(); ++b) {
      TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
      TANDEM_ASSIGN_OR_RETURN(Tensor x,
                              ToModel(batch.features, config.dtype, device));
      TANDEM_ASSIGN_OR_RETURN(Tensor y, batch.labels.To(device));
      Tensor loss;
      {
        std::optional<amp::Autocast> autocast;
        if (config.amp.has_value())
          autocast.emplace(device.type(), *config.amp);
        TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(loss, CrossEntropy(logits, y));
      }
      sgd.ZeroGrad();
      TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
      TANDEM_RETURN_IF_ERROR(sgd.Step());
      ++global_step;
      ++result.steps;
      TANDEM_ASSIGN_OR_RETURN(double value, loss.Item());
      TANDEM_RETURN_IF_ERROR(
          CheckStepFinite(comm, *model,
                          {.epoch = epoch,
                           .step = b,
                           .loss = value,
                           .check_parameters = ParameterCheckDue(b, steps)})
              .status());
      if (config.print_step_losses) {
        out.PrintOnAllRanks(
            absl::StrFormat("step %d loss %.17g", global_step - 1, value));
      }
      const int64_t n = batch.labels.numel();
      sums[0] += value * static_cast<double>(n);
      sums[1] += static_cast<double>(n);
      images += n * world;
      if (monitor != nullptr) {
        ReportStep(*monitor, *ddp,
                   {.epoch = epoch,
                    .epochs = config.epochs,
                    .step = b,
                    .steps_per_epoch = steps,
                    .samples = n * world,
                    .loss = value});
      }
      // The schedule steps per epoch, before the epoch's last save.
      if (b + 1 == steps) TANDEM_RETURN_IF_ERROR(scheduler->Step());
      state.extra.clear();
      for (const auto& [key, value] : scheduler->StateDict()) {
        state.extra[kSchedulerPrefix + key] = value;
      }
      if (checkpointer.SaveDueAfter(b, steps) && b + 1 < steps) {
        std::vector<double> global = sums;  // collective: every rank
        TANDEM_RETURN_IF_ERROR(AllReduceSum(comm, global, device));
        state.extra[kEpochSumsKey] = DoublesToBits(global);
      }
      TANDEM_RETURN_IF_ERROR(checkpointer.AfterStep(state, epoch, b, steps));
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - epoch_start);
    TANDEM_RETURN_IF_ERROR(AllReduceSum(comm, sums, device));
    result.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0;

    // Held out: each rank a disjoint strided slice, in eval mode (the first
    // eval Forward broadcasts rank 0's buffers, so every rank scores with
    // the same running statistics).
    model->Eval();
    std::vector<double> correct_total = {0, 0};
    {
      NoGradGuard no_grad;
      std::vector<int64_t> mine;
      for (int64_t i = rank; i < val_size; i += world) {
        mine.push_back(data.val_indices[static_cast<size_t>(i)]);
      }
      Generator unused(0);  // the held-out transform draws nothing
      TANDEM_ASSIGN_OR_RETURN(
          DataLoader val_loader,
          DataLoader::Create(data.val, std::move(mine), config.batch_size,
                             /*drop_last=*/false, unused,
                             {.num_workers = config.num_workers}));
      for (int64_t b = 0; b < val_loader.num_batches(); ++b) {
        TANDEM_ASSIGN_OR_RETURN(Batch batch, val_loader.GetBatch(b));
        TANDEM_ASSIGN_OR_RETURN(Tensor x,
                                ToModel(batch.features, config.dtype, device));
        std::optional<amp::Autocast> autocast;
        if (config.amp.has_value())
          autocast.emplace(device.type(), *config.amp);
        TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(x));
        const int64_t correct = CountCorrect(logits, batch.labels);
        if (correct < 0) {
          return absl::InternalError("resnet_ddp: argmax of the logits failed");
        }
        correct_total[0] += static_cast<double>(correct);
        correct_total[1] += static_cast<double>(batch.labels.numel());
      }
    }
    model->Train();
    TANDEM_RETURN_IF_ERROR(AllReduceSum(comm, correct_total, device));
    result.val_correct = static_cast<int64_t>(correct_total[0]);
    result.val_total = static_cast<int64_t>(correct_total[1]);
    const double top1 = correct_total[0] / correct_total[1];
    if (monitor != nullptr) {
      monitor->Epoch({.epoch = epoch,
                      .epochs = config.epochs,
                      .train_loss = result.train_loss,
                      .samples = static_cast<int64_t>(sums[1])});
      monitor->Test(top1, result.val_correct, result.val_total);
    }
    out.PrintOnRank0(absl::StrFormat(
        "Epoch %03d/%03d | train loss %.4f | val top-1 %.4f (%d/%d) | %.1f "
        "images/s",
        epoch + 1, config.epochs, result.train_loss, top1, result.val_correct,
        result.val_total, seconds > 0 ? images / seconds : 0.0));
  }
  return result;
}

}  // namespace tandem::train
