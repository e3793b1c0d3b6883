#include "train/loop/training_loop.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/amp/autocast.h"
#include "tensor/ops.h"
#include "train/parallel/core/finite_check.h"

namespace tandem::train {

absl::StatusOr<SampledBatches> SampledBatches::Create(
    const TensorDataset& data, const comm::Communicator& comm,
    int64_t batch_size, bool drop_last) {
  // shuffle = true, seed = 0: PyTorch's defaults.
  TANDEM_ASSIGN_OR_RETURN(
      DistributedSampler sampler,
      DistributedSampler::Create(
          data.size(), {.num_replicas = comm.size(), .rank = comm.rank()}));
  return SampledBatches(data, std::move(sampler), batch_size, drop_last);
}

absl::StatusOr<int64_t> SampledBatches::BeginEpoch(int64_t epoch) {
  sampler_.SetEpoch(epoch);
  TANDEM_ASSIGN_OR_RETURN(
      DataLoader loader,
      DataLoader::Create(data_, sampler_.Indices(), batch_size_, drop_last_));
  loader_.emplace(std::move(loader));
  return loader_->num_batches();
}

absl::StatusOr<Batch> SampledBatches::GetBatch(int64_t step) {
  TANDEM_ASSIGN_OR_RETURN(const DataLoader* l, loader());
  return l->GetBatch(step);
}

absl::StatusOr<const DataLoader*> SampledBatches::loader() const {
  if (!loader_.has_value()) {
    return absl::FailedPreconditionError(
        "SampledBatches: no epoch prepared yet; call BeginEpoch first");
  }
  return &*loader_;
}

namespace {

// `t` on `device` (itself, no copy, when it is there already).
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  return t.To(device);
}

}  // namespace

LossFn CrossEntropyLoss() {
  return [](const Tensor& output, const Tensor& labels) {
    return CrossEntropy(output, labels);
  };
}

TrainingLoop::TrainingLoop(comm::Communicator& comm, nn::Module& model,
                           Strategy& strategy, LoopOptions options)
    : comm_(comm),
      model_(model),
      strategy_(strategy),
      options_(std::move(options)),
      checkpointer_(options_.checkpoint, comm, options_.device, options_.who) {
  // A sharded strategy saves and loads the full state (gathered on save,
  // sliced on load), so the files are --shard=none's in every mode.
  if (strategy_.full_optimizer() == nullptr) {
    state_.load_model = [this](const nn::StateDict& s) {
      return strategy_.LoadFullModelState(s);
    };
    state_.load_optimizer = [this](const std::vector<optim::StateEntry>& s) {
      return strategy_.LoadFullOptimizerState(s);
    };
  } else {
    state_.model = &model_;
    state_.optimizer = strategy_.full_optimizer();
  }
}

absl::StatusOr<checkpoint::TrainingProgress> TrainingLoop::Resume() {
  if (!start_.has_value()) {
    TANDEM_ASSIGN_OR_RETURN(start_, checkpointer_.Resume(state_));
  }
  return *start_;
}

absl::Status TrainingLoop::Save(int64_t epoch, int64_t step, int64_t steps,
                                const LoopHooks& hooks) {
  state_.extra.clear();
  const bool due = checkpointer_.SaveDueAfter(step, steps);
  if (due && step + 1 < steps && hooks.mid_epoch_extra) {
    TANDEM_ASSIGN_OR_RETURN(state_.extra, hooks.mid_epoch_extra());
  }
  const bool sharded = strategy_.full_optimizer() == nullptr;
  if (sharded && due) {
    // Collective: every rank gathers, rank 0 saves.
    TANDEM_ASSIGN_OR_RETURN(full_.model, strategy_.FullModelState());
    TANDEM_ASSIGN_OR_RETURN(full_.optimizer, strategy_.FullOptimizerState());
    full_.lr = strategy_.lr();
    full_.param_groups = strategy_.FullParamGroups();
    state_.full = &full_;
  }
  absl::Status saved = checkpointer_.AfterStep(state_, epoch, step, steps);
  state_.full = nullptr;
  full_ = {};
  return saved;
}

absl::Status TrainingLoop::Run(EpochBatches& data, const LossFn& loss_fn,
                               const LoopHooks& hooks) {
  if (!(options_.max_grad_norm >= 0 &&
        options_.max_grad_norm < std::numeric_limits<double>::infinity())) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.who,
                     ": the gradient clipping norm must be finite and >= 0 "
                     "(0: no clipping); found ",
                     options_.max_grad_norm));
  }
  TANDEM_ASSIGN_OR_RETURN(const checkpoint::TrainingProgress start, Resume());
  const comm::RankPrinter printer(comm_);
  const Device device = options_.device;
  // The runner's progress line and metrics file (rank 0 reports).
  RunMonitor* const monitor = comm_.rank() == 0 ? ActiveRunMonitor() : nullptr;
  for (int64_t epoch = start.epoch; epoch < options_.epochs; ++epoch) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t steps, data.BeginEpoch(epoch));
    model_.Train();
    const int64_t first_step = epoch == start.epoch ? start.step_in_epoch : 0;
    if (hooks.begin_epoch) {
      TANDEM_RETURN_IF_ERROR(hooks.begin_epoch(epoch, first_step));
    }
    for (int64_t b = first_step; b < steps; ++b) {
      TANDEM_ASSIGN_OR_RETURN(const Batch batch, data.GetBatch(b));
      TANDEM_ASSIGN_OR_RETURN(Tensor features,
                              OnDevice(batch.features, device));
      TANDEM_ASSIGN_OR_RETURN(Tensor labels, OnDevice(batch.labels, device));
      Tensor output;
      Tensor loss;
      {
        // Forward and loss under autocast; backward outside it, as in
        // PyTorch's recipe.
        std::optional<amp::Autocast> autocast;
        if (options_.autocast.has_value()) {
          autocast.emplace(device.type(), *options_.autocast);
        }
        TANDEM_ASSIGN_OR_RETURN(output, strategy_.Forward(features));
        TANDEM_ASSIGN_OR_RETURN(loss, loss_fn(output, labels));
      }
      strategy_.ZeroGrad();
      TANDEM_RETURN_IF_ERROR(strategy_.Backward(loss));
      if (options_.max_grad_norm > 0) {
        TANDEM_RETURN_IF_ERROR(
            strategy_.ClipGradNorm(options_.max_grad_norm).status());
      }
      TANDEM_RETURN_IF_ERROR(strategy_.Step());
      TANDEM_ASSIGN_OR_RETURN(const double value, loss.Item());
      if (hooks.after_step) {
        TANDEM_RETURN_IF_ERROR(hooks.after_step({.epoch = epoch,
                                                 .step = b,
                                                 .steps_in_epoch = steps,
                                                 .batch = &batch,
                                                 .output = output,
                                                 .loss = value}));
      }
      if (monitor != nullptr) {
        // Every rank's batch has this size (the sampler pads evenly).
        StepReport report{.epoch = epoch,
                          .epochs = options_.epochs,
                          .step = b,
                          .steps_per_epoch = steps,
                          .samples = batch.labels.dim(0) * comm_.size(),
                          .loss = value};
        if (strategy_.ddp() != nullptr) {
          ReportStep(*monitor, *strategy_.ddp(), report);
        } else {
          report.comm_seconds = 0.0;
          report.wait_seconds = 0.0;
          monitor->Step(report);
        }
      }
      // Every rank stops together on a non-finite loss (every step) or
      // parameter (scanned every kParameterCheckInterval steps and at the
      // end of the epoch; under fsdp the parameters live in shards between
      // steps, so only the loss is checked).
      TANDEM_RETURN_IF_ERROR(
          CheckStepFinite(
              comm_, model_,
              {.epoch = epoch,
               .step = b,
               .loss = value,
               .check_parameters = strategy_.parameters_resident() &&
                                   ParameterCheckDue(b, steps)})
              .status());
      TANDEM_RETURN_IF_ERROR(Save(epoch, b, steps, hooks));
    }
    if (hooks.end_epoch) {
      TANDEM_ASSIGN_OR_RETURN(EpochEnd end, hooks.end_epoch(epoch, steps));
      if (monitor != nullptr) {
        end.report.epoch = epoch;
        end.report.epochs = options_.epochs;
        monitor->Epoch(end.report);
      }
      if (!end.rank0_line.empty()) printer.PrintOnRank0(end.rank0_line);
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
