#include "train/examples/resnet_ddp_lib.h"

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
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "comm/types.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/models/resnet.h"
#include "tensor/optim/lr_scheduler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/checkpoint/safetensors.h"
#include "train/data/data_loader.h"
#include "train/data/distributed_sampler.h"
#include "train/examples/model_memory.h"
#include "train/loop/evaluate.h"
#include "train/loop/must_match.h"
#include "train/loop/training_loop.h"
#include "train/parallel/core/config_agreement.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/ddp/sync_batch_norm.h"

namespace tandem::train {
namespace {

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

// What BuildModel would build, counted without building it.
absl::StatusOr<int64_t> ParameterCount(const std::string& arch,
                                       int64_t num_classes) {
  using Kind = nn::ResNet::BlockKind;
  if (arch == "resnet18") {
    return nn::ResNet::NumParametersOf(Kind::kBasic, {2, 2, 2, 2}, num_classes);
  }
  if (arch == "resnet34") {
    return nn::ResNet::NumParametersOf(Kind::kBasic, {3, 4, 6, 3}, num_classes);
  }
  if (arch == "resnet50") {
    return nn::ResNet::NumParametersOf(Kind::kBottleneck, {3, 4, 6, 3},
                                       num_classes);
  }
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

// The generator a rank's epoch draws its augmentations from: a function of
// the seed, the epoch and the rank only, so a resumed epoch draws the same.
Generator EpochGenerator(uint64_t seed, int64_t epoch, int rank) {
  return Generator(seed * 1000003 + static_cast<uint64_t>(epoch) * 7919 +
                   static_cast<uint64_t>(rank) * 104729 + 17);
}

// The training batches of each epoch: this rank's DistributedSampler shard
// of the training images (shuffled with the epoch), augmented from
// EpochGenerator, in the model's dtype.
class ResnetBatches : public EpochBatches {
 public:
  ResnetBatches(const ResnetData& data, DistributedSampler sampler,
                const ResnetConfig& config, int rank)
      : data_(data),
        sampler_(std::move(sampler)),
        config_(config),
        rank_(rank) {}
  absl::StatusOr<int64_t> BeginEpoch(int64_t epoch) override {
    sampler_.SetEpoch(epoch);
    std::vector<int64_t> indices = sampler_.Indices();
    for (int64_t& i : indices) i = data_.train_indices[static_cast<size_t>(i)];
    Generator augment = EpochGenerator(config_.data.seed, epoch, rank_);
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data_.train, std::move(indices), config_.batch_size,
                           /*drop_last=*/true, augment,
                           {.num_workers = config_.num_workers}));
    loader_.emplace(std::move(loader));
    return loader_->num_batches();
  }
  absl::StatusOr<Batch> GetBatch(int64_t step) override {
    TANDEM_ASSIGN_OR_RETURN(Batch batch, loader_->GetBatch(step));
    if (batch.features.dtype() != config_.dtype) {
      TANDEM_ASSIGN_OR_RETURN(batch.features, batch.features.To(config_.dtype));
    }
    return batch;
  }

 private:
  const ResnetData& data_;
  DistributedSampler sampler_;
  const ResnetConfig& config_;
  int rank_;
  std::optional<DataLoader> loader_;
};

// Top-1 on the held-out split: each rank a disjoint strided slice, in eval
// mode through DDP (its first eval Forward broadcasts rank 0's buffers, so
// every rank scores with the same running statistics), counts summed over
// the ranks. Collective.
absl::StatusOr<Score> Validate(comm::Communicator& comm, Strategy& strategy,
                               nn::Module& model, const ResnetData& data,
                               const ResnetConfig& config, Device device) {
  model.Eval();
  std::vector<double> counts = {0, 0};
  {
    NoGradGuard no_grad;
    std::vector<int64_t> mine;
    for (size_t i = comm.rank(); i < data.val_indices.size();
         i += comm.size()) {
      mine.push_back(data.val_indices[i]);
    }
    Generator unused(0);  // the held-out transform draws nothing
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data.val, std::move(mine), config.batch_size,
                           /*drop_last=*/false, unused,
                           {.num_workers = config.num_workers}));
    for (int64_t b = 0; b < loader.num_batches(); ++b) {
      TANDEM_ASSIGN_OR_RETURN(Batch batch, loader.GetBatch(b));
      Tensor x = batch.features;
      if (x.dtype() != config.dtype) {
        TANDEM_ASSIGN_OR_RETURN(x, x.To(config.dtype));
      }
      if (x.device() != device) {
        TANDEM_ASSIGN_OR_RETURN(x, x.To(device));
      }
      std::optional<amp::Autocast> autocast;
      if (config.amp.has_value()) autocast.emplace(device.type(), *config.amp);
      TANDEM_ASSIGN_OR_RETURN(Tensor logits,
                              strategy.mutable_ddp()->Forward(x));
      TANDEM_ASSIGN_OR_RETURN(const int64_t correct,
                              CountCorrect(logits, batch.labels));
      counts[0] += static_cast<double>(correct);
      counts[1] += static_cast<double>(batch.labels.numel());
    }
  }
  model.Train();
  TANDEM_RETURN_IF_ERROR(
      AllReduceF64(comm, device, absl::MakeSpan(counts), comm::ReduceOp::kSum));
  return Score{.correct = static_cast<int64_t>(counts[0]),
               .total = static_cast<int64_t>(counts[1])};
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
  const std::vector<ConfigEntry> agreed = {
      ConfigEntry("--arch", config.arch),
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
      ConfigEntry("--checkpoint_every", config.checkpoint.every_steps)};
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(comm, device, agreed));

  if (absl::Status s = CheckResnetConfig(config); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("resnet_ddp: ", s.message()));
  }
  if (config.amp.has_value()) {
    TANDEM_RETURN_IF_ERROR(amp::Autocast::Check(device.type(), *config.amp));
  }
  TANDEM_ASSIGN_OR_RETURN(ResnetData data, LoadResnetData(config.data));
  // A resume must be this run's: the images by what they are, not where
  // (--data's path may move). The run's length may change, except where the
  // cosine schedule's shape depends on it.
  std::vector<ConfigEntry> identity;
  for (const ConfigEntry& e : agreed) {
    if (e.name != "--data") identity.push_back(e);
  }
  identity.emplace_back("the images (listing hash)", data.fingerprint);
  if (config.lr_schedule == "cosine") {
    identity.emplace_back("the cosine schedule's length (--epochs)",
                          config.epochs);
  }
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
  TANDEM_ASSIGN_OR_RETURN(const int64_t parameters,
                          ParameterCount(config.arch, data.num_classes));
  TANDEM_RETURN_IF_ERROR(CheckModelsFitInMemory(
      comm, "resnet_ddp", parameters, 3 * DTypeSize(config.dtype),
      absl::StrCat(DTypeName(config.dtype),
                   " weights, gradients and SGD's momentum")));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::ResNet> model,
                          BuildModel(config.arch, data.num_classes,
                                     config.data.seed, config.dtype));
  if (config.sync_bn) {
    TANDEM_RETURN_IF_ERROR(ConvertSyncBatchNorm(*model, comm).status());
  }
  TANDEM_RETURN_IF_ERROR(model->To(device));
  model->Train();
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(
          comm, *model, ShardMode::kNone,
          SgdFactory(config.lr, {.momentum = config.momentum,
                                 .weight_decay = config.weight_decay}),
          {.who = "resnet_ddp",
           .epochs = config.epochs,
           .device = device,
           .checkpoint = config.checkpoint,
           .autocast = config.amp,
           .epoch_sums = {"loss", "count"},
           .max_steps = config.max_steps,
           .must_match = MustMatchOnResume(identity)}));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<optim::LrScheduler> scheduler,
      MakeScheduler(config, loop->strategy().full_optimizer()));
  loop->SetLrScheduler(std::move(scheduler), ScheduleEvery::kEpoch);
  if (!config.save_init.empty() && rank == 0) {
    TANDEM_RETURN_IF_ERROR(
        checkpoint::SaveSafetensors(config.save_init, model->StateDict()));
  }
  TANDEM_RETURN_IF_ERROR(loop->Resume().status());
  const comm::RankPrinter out(comm);
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
  ResnetBatches batches(data, std::move(sampler), config, rank);

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
    if (config.print_step_losses) {
      out.PrintOnAllRanks(
          absl::StrFormat("step %d loss %.17g", s.global_step, s.loss));
    }
    return absl::OkStatus();
  };
  hooks.end_epoch = [&](int64_t epoch, int64_t) -> absl::StatusOr<EpochEnd> {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - epoch_start);
    const std::vector<double>& sums = loop->epoch_sums();
    result.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
    TANDEM_ASSIGN_OR_RETURN(
        const Score val,
        Validate(comm, loop->strategy(), *model, data, config, device));
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
