#include "train/examples/resnet_ddp/resnet_ddp_lib.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "tensor/amp/autocast.h"
#include "tensor/generator.h"
#include "tensor/nn/models/resnet.h"
#include "tensor/optim/lr_scheduler.h"
#include "tensor/optim/sgd.h"
#include "train/checkpoint/safetensors.h"
#include "train/data/datasets/image_splits.h"
#include "train/examples/runner/model_memory.h"
#include "train/examples/runner/rank_flags.h"
#include "train/loop/map_batches.h"
#include "train/loop/must_match.h"
#include "train/loop/virtual_rank_printer.h"
#include "train/parallel/ddp/sync_batch_norm.h"

namespace tandem::train {
namespace {

// SGD's fixed hyper-parameters (the reference recipe's).
constexpr double kMomentum = 0.9;
constexpr double kWeightDecay = 5e-4;

}  // namespace

absl::Status CheckResnetConfig(const ResnetConfig& c) {
  if (c.amp != "off" && c.amp != "bf16" && c.amp != "f16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--amp=", c.amp, "; expected off or bf16"));
  }
  if (c.data != "synthetic") {
    std::error_code error;
    if (!std::filesystem::is_directory(c.data, error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data=", c.data,
          " is not a folder; pass an image folder (one sub-folder of images "
          "per class, or train/ and val/ holding such folders) or "
          "--data=synthetic"));
    }
  }
  if (c.amp == "f16") {
    return absl::InvalidArgumentError(
        "--amp=f16; resnet_ddp takes --amp=bf16 or off (f16 needs a "
        "GradScaler, which resnet_ddp does not run)");
  }
  if (c.amp == "bf16" && c.dtype != "f32") {
    return absl::InvalidArgumentError(
        "--amp=bf16 with --dtype=f64; autocast lowers f32 models only: "
        "drop one of them");
  }
  return optim::Sgd::CheckHyperParameters(
      c.lr, {.momentum = kMomentum, .weight_decay = kWeightDecay});
}

absl::StatusOr<ResnetResult> RunResnetDdp(comm::Communicator& comm,
                                          const ResnetConfig& config,
                                          Device device) {
  // The flags, first, before any rank can fail alone on its own (mpirun
  // MPMD): the same on every rank, each keeping its rule.
  const std::vector<RankFlag> flags =
      WithCheckpointFlags(config.RankFlags(), config.checkpoint);
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(comm, device, "resnet_ddp", flags));
  if (absl::Status s = CheckResnetConfig(config); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resnet_ddp: ", s.message()));
  }
  const DType dtype = config.dtype == "f64" ? DType::kF64 : DType::kF32;
  const std::optional<DType> autocast = AutocastDType(config.amp);
  if (autocast.has_value()) {
    TANDEM_RETURN_IF_ERROR(amp::Autocast::Check(device.type(), *autocast));
  }
  // The replicas the data is split over: the ranks, or the virtual ranks.
  const int64_t world =
      config.virtual_world > 0 ? config.virtual_world : comm.size();

  // The images: enough for a full batch and a held-out image on every rank.
  TANDEM_ASSIGN_OR_RETURN(
      ImageSplits data,
      LoadImageSplits({.data = config.data,
                       .image_size = config.image_size,
                       .num_classes = config.num_classes,
                       .synthetic_size = config.synthetic_size,
                       .val_fraction = config.val_fraction,
                       .split_seed = config.split_seed,
                       .seed = config.seed,
                       .who = "resnet_ddp"}));
  const int64_t train_size = static_cast<int64_t>(data.train_indices.size());
  const int64_t val_size = static_cast<int64_t>(data.val_indices.size());
  if (val_size < world ||
      (train_size + world - 1) / world < config.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "resnet_ddp: ", train_size, " training and ", val_size,
        " held-out images for ", world,
        config.virtual_world > 0 ? " virtual rank(s)" : " rank(s)",
        " with --batch_size=", config.batch_size,
        "; each rank needs one full batch and one "
        "held-out image: add images, lower --batch_size or use fewer ranks"));
  }
  const MapBatchOptions batching{.batch_size = config.batch_size,
                                 .seed = config.seed,
                                 .num_workers = config.num_workers,
                                 .dtype = dtype,
                                 .virtual_world = config.virtual_world};
  TANDEM_ASSIGN_OR_RETURN(
      MapBatches batches,
      MapBatches::Create(data.train, data.train_indices, comm, batching));

  // The model, if every rank's copy fits: torchvision's weights for
  // torch.manual_seed(seed), optionally with SyncBatchNorm.
  TANDEM_ASSIGN_OR_RETURN(const nn::ResNetArch arch,
                          nn::ResNetArchOf(config.arch));
  TANDEM_RETURN_IF_ERROR(CheckModelsFitInMemory(
      comm, "resnet_ddp",
      nn::ResNet::NumParametersOf(arch.block, arch.layers, data.num_classes),
      3 * DTypeSize(dtype),
      absl::StrCat(DTypeName(dtype),
                   " weights, gradients and SGD's momentum")));
  Generator init(config.seed);
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<nn::ResNet> model,
      nn::ResNet::Create(arch.block, arch.layers, data.num_classes, init,
                         {.dtype = dtype}));
  if (config.sync_bn) {
    TANDEM_RETURN_IF_ERROR(ConvertSyncBatchNorm(*model, comm).status());
  }
  TANDEM_RETURN_IF_ERROR(model->To(device));
  model->Train();

  // The loop: DDP and SGD, the schedule stepped per epoch, checkpoints. A
  // resume must be this run's: the images by what they are, not where
  // (--data's path may move); the run's length may change, except where the
  // cosine schedule's shape depends on it.
  std::vector<ConfigEntry> identity;
  for (const ConfigEntry& e : Entries(flags)) {
    if (e.name != "--data") identity.push_back(e);
  }
  identity.emplace_back("the images (listing hash)", data.fingerprint);
  if (config.lr_schedule == "cosine") {
    identity.emplace_back("the cosine schedule's length (--epochs)",
                          config.epochs);
  }
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(
          comm, *model, ShardMode::kNone,
          SgdFactory(config.lr,
                     {.momentum = kMomentum, .weight_decay = kWeightDecay}),
          {.who = "resnet_ddp",
           .epochs = config.epochs,
           .device = device,
           .checkpoint = config.checkpoint,
           .autocast = autocast,
           .epoch_sums = {"loss", "count"},
           .max_steps = config.max_steps,
           .must_match = MustMatchOnResume(identity),
           .virtual_world = config.virtual_world}));
  optim::Optimizer* sgd = loop->strategy().full_optimizer();
  std::unique_ptr<optim::LrScheduler> scheduler;
  if (config.lr_schedule == "cosine") {
    TANDEM_ASSIGN_OR_RETURN(
        scheduler, optim::CosineAnnealingLR::Create(sgd, config.epochs));
  } else {
    TANDEM_ASSIGN_OR_RETURN(
        scheduler, optim::StepLR::Create(sgd, config.lr_step_epochs, 0.1));
  }
  loop->SetLrScheduler(std::move(scheduler), ScheduleEvery::kEpoch);
  if (!config.save_init.empty() && comm.rank() == 0) {
    TANDEM_RETURN_IF_ERROR(
        checkpoint::SaveSafetensors(config.save_init, model->StateDict()));
  }
  TANDEM_RETURN_IF_ERROR(loop->Resume().status());
  VirtualRankPrinter& out = loop->printer();
  out.PrintOnRank0(absl::StrFormat(
      "resnet_ddp: %s, %s, batch %d per rank, %s%s%s, %s", config.arch,
      WorldDescription(comm, config.virtual_world), config.batch_size,
      DTypeName(dtype), autocast.has_value() ? ", autocast bf16" : "",
      config.sync_bn ? ", SyncBatchNorm" : "", data.description));

  // The epochs: the mean loss and the images of each, its held-out top-1.
  ResnetResult result;
  absl::Time epoch_start;
  int64_t images = 0;  // this epoch's, over every rank
  LoopHooks hooks;
  hooks.begin_epoch = [&](int64_t, int64_t) {
    epoch_start = absl::Now();
    images = 0;
    return absl::OkStatus();
  };
  hooks.after_step = [&](const StepView& s) {
    const int64_t n = s.batch->labels.numel();
    (*s.sums)[0] += s.loss * static_cast<double>(n);
    (*s.sums)[1] += static_cast<double>(n);
    images += n * world;
    ++result.steps;
    return absl::OkStatus();
  };
  hooks.after_checked_step = [&](const StepView& s) {
    if (!config.print_step_losses) return absl::OkStatus();
    return out.PrintOnRank(
        s.rank, absl::StrFormat("step %d loss %.17g", s.global_step, s.loss));
  };
  hooks.end_epoch = [&](int64_t epoch, int64_t) -> absl::StatusOr<EpochEnd> {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - epoch_start);
    const std::vector<double>& sums = loop->epoch_sums();
    result.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
    TANDEM_ASSIGN_OR_RETURN(
        const Score val,
        HeldOutTop1(*loop, data.val, data.val_indices, batching));
    result.val_correct = val.correct;
    result.val_total = val.total;
    return EpochEnd{
        .report = {.train_loss = result.train_loss,
                   .samples = static_cast<int64_t>(sums[1])},
        .rank0_line = absl::StrFormat(
            "Epoch %03d/%03d | train loss %.4f | val top-1 %.4f (%d/%d) | "
            "%.1f images/s",
            epoch + 1, config.epochs, result.train_loss, val.accuracy(),
            val.correct, val.total, seconds > 0 ? images / seconds : 0.0),
        .test = EpochEnd::Test{.accuracy = val.accuracy(),
                               .correct = val.correct,
                               .total = val.total}};
  };
  TANDEM_RETURN_IF_ERROR(loop->Run(batches, CrossEntropyLoss(), hooks));
  return result;
}

}  // namespace tandem::train
