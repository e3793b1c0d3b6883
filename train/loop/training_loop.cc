#include "train/loop/training_loop.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "comm/types.h"
#include "tensor/amp/autocast.h"
#include "tensor/ops.h"
#include "train/loop/rank_values.h"
#include "train/parallel/core/config_agreement.h"
#include "train/parallel/core/finite_check.h"
#include "train/parallel/core/found_inf.h"
#include "train/parallel/core/staged_all_gather.h"
#include "train/parallel/core/virtual_world.h"

namespace tandem::train {

absl::StatusOr<Batch> EpochBatches::GetReplicaBatch(int64_t step, int64_t v) {
  if (v != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this data source gives one rank's batches; asked for replica ", v,
        " (the virtual world needs a source built for it, e.g. "
        "SampledBatches::Create(..., virtual_world))"));
  }
  return GetBatch(step);
}

absl::StatusOr<SampledBatches> SampledBatches::Create(
    const TensorDataset& data, const comm::Communicator& comm,
    int64_t batch_size, bool drop_last, int64_t virtual_world) {
  TANDEM_ASSIGN_OR_RETURN(
      const VirtualWorld vw,
      PlaceVirtualWorld(virtual_world, comm.size(), comm.rank()));
  const int64_t replicas = vw.on() ? vw.size : comm.size();
  std::vector<DistributedSampler> samplers;
  for (int64_t v = 0; v < vw.local; ++v) {
    // shuffle = true, seed = 0: PyTorch's defaults.
    TANDEM_ASSIGN_OR_RETURN(
        DistributedSampler sampler,
        DistributedSampler::Create(
            data.size(), {.num_replicas = replicas, .rank = vw.rank_of(v)}));
    samplers.push_back(std::move(sampler));
  }
  return SampledBatches(data, std::move(samplers), batch_size, drop_last);
}

absl::StatusOr<int64_t> SampledBatches::BeginEpoch(int64_t epoch) {
  loaders_.clear();
  for (DistributedSampler& sampler : samplers_) {
    sampler.SetEpoch(epoch);
    TANDEM_ASSIGN_OR_RETURN(
        DataLoader loader,
        DataLoader::Create(data_, sampler.Indices(), batch_size_, drop_last_));
    loaders_.push_back(std::move(loader));
  }
  // The sampler pads every shard to one size: the same count everywhere.
  return loaders_[0].num_batches();
}

absl::StatusOr<Batch> SampledBatches::GetBatch(int64_t step) {
  return GetReplicaBatch(step, 0);
}

absl::StatusOr<Batch> SampledBatches::GetReplicaBatch(int64_t step, int64_t v) {
  TANDEM_ASSIGN_OR_RETURN(const DataLoader* l, loader(v));
  return l->GetBatch(step);
}

absl::StatusOr<const DataLoader*> SampledBatches::loader(int64_t v) const {
  if (loaders_.empty()) {
    return absl::FailedPreconditionError(
        "SampledBatches: no epoch prepared yet; call BeginEpoch first");
  }
  if (v < 0 || v >= static_cast<int64_t>(loaders_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("SampledBatches: replica ", v, " of ", loaders_.size()));
  }
  return &loaders_[v];
}

namespace {

// `t` on `device` (itself, no copy, when it is there already).
absl::StatusOr<Tensor> OnDevice(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  return t.To(device);
}

// Micro-batch `m` of `count` equal parts of `t` along its first dimension
// (a view); InvalidArgument when `count` does not divide its rows.
absl::StatusOr<Tensor> MicroBatch(const Tensor& t, int64_t m, int64_t count,
                                  const std::string& who) {
  if (t.shape().empty() || t.dim(0) % count != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": gradient accumulation cuts each batch into ", count,
        " equal micro-batches along its first dimension; this batch has ",
        t.shape().empty() ? 0 : t.dim(0),
        " rows: give batches of a multiple of grad_accum rows"));
  }
  Shape shape = t.shape();
  shape[0] /= count;
  return t.View(m * (t.numel() / count), std::move(shape));
}

constexpr char kScaleBitsKey[] = "grad_scaler.scale_bits";
constexpr char kGrowthTrackerKey[] = "grad_scaler.growth_tracker";
constexpr char kSchedulerPrefix[] = "lr_scheduler.";

// The GradScaler's state as checkpoint metadata: the scale as the bits of
// its double (exact) and the growth tracker.
void ScalerStateToExtra(const optim::GradScalerState& s,
                        checkpoint::Metadata& extra) {
  int64_t bits;
  static_assert(sizeof(bits) == sizeof(s.scale));
  std::memcpy(&bits, &s.scale, sizeof(bits));
  extra[kScaleBitsKey] = absl::StrCat(bits);
  extra[kGrowthTrackerKey] = absl::StrCat(s.growth_tracker);
}

absl::StatusOr<optim::GradScalerState> ScalerStateFromExtra(
    const checkpoint::Metadata& extra, const std::string& who) {
  optim::GradScalerState out;
  auto scale = extra.find(kScaleBitsKey);
  auto tracker = extra.find(kGrowthTrackerKey);
  int64_t bits = 0;
  if (scale == extra.end() || tracker == extra.end() ||
      !absl::SimpleAtoi(scale->second, &bits) ||
      !absl::SimpleAtoi(tracker->second, &out.growth_tracker)) {
    return absl::InvalidArgumentError(absl::StrCat(
        who,
        ": the checkpoint has no valid GradScaler state "
        "(grad_scaler.scale_bits, grad_scaler.growth_tracker); it was not "
        "written by ",
        who, ": start from a fresh --checkpoint_dir"));
  }
  std::memcpy(&out.scale, &bits, sizeof(bits));
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
      checkpointer_(options_.checkpoint, comm, options_.device, options_.who),
      printer_(comm, options_.device, strategy.virtual_world()) {
  const VirtualWorld& vw = strategy_.virtual_world();
  if (vw.on()) {
    // The data's position is virtual rank k's of K, whatever W.
    checkpointer_.set_data_world_size(vw.size);
  }
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
  // The program first: another example's checkpoint is named as such, not
  // as a list of every flag it lacks.
  if (!options_.must_match.empty()) {
    state_.must_match = {{"the program", options_.who}};
    state_.must_match.insert(state_.must_match.end(),
                             options_.must_match.begin(),
                             options_.must_match.end());
  }
}

namespace {

// `strategy`, its fsdp dtype defaulting to the autocast dtype.
StrategyOptions StrategyFor(StrategyOptions strategy,
                            const LoopOptions& options) {
  if (!strategy.fsdp_param_dtype.has_value()) {
    strategy.fsdp_param_dtype = options.autocast;
  }
  if (strategy.virtual_world == 0) {
    strategy.virtual_world = options.virtual_world;
  }
  return strategy;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingLoop>> TrainingLoop::Create(
    comm::Communicator& comm, nn::Module& model, ShardMode mode,
    const ShardOptimizerFactory& make_optimizer, LoopOptions options,
    StrategyOptions strategy_options) {
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<Strategy> strategy,
      Strategy::Create(mode, model, comm, make_optimizer,
                       StrategyFor(std::move(strategy_options), options)));
  auto loop = std::make_unique<TrainingLoop>(comm, model, *strategy,
                                             std::move(options));
  loop->owned_strategy_ = std::move(strategy);
  return loop;
}

uint64_t TrainingLoop::StepSeed(int64_t global_step, int64_t rank64) const {
  const uint64_t seed = options_.step_seed;
  // Hashed as an int, as the rank always was (the seeds stay as they were).
  const int rank = static_cast<int>(rank64);
  uint64_t h = HashBytes(&seed, sizeof(seed));
  h = HashBytes(&rank, sizeof(rank), h);
  return HashBytes(&global_step, sizeof(global_step), h);
}

std::string TrainingLoop::ModelKey() const { return options_.who + ".model"; }

absl::Status TrainingLoop::SetLr(int64_t global_step) {
  optim::Optimizer* local = strategy_.local_optimizer();
  if (local == nullptr) return absl::OkStatus();
  const double lr = options_.lr_at(global_step);
  for (size_t g = 0; g < local->num_param_groups(); ++g) {
    TANDEM_RETURN_IF_ERROR(local->set_lr(g, lr));
  }
  return absl::OkStatus();
}

std::string TrainingLoop::SumsPrefix() const {
  return options_.who + ".epoch_";
}

void TrainingLoop::ReportTest(const Score& score) const {
  RunMonitor* const monitor = comm_.rank() == 0 ? ActiveRunMonitor() : nullptr;
  if (monitor != nullptr) {
    monitor->Test(score.accuracy(), score.correct, score.total);
  }
}

void TrainingLoop::SetLrScheduler(std::unique_ptr<optim::LrScheduler> scheduler,
                                  ScheduleEvery every) {
  scheduler_ = std::move(scheduler);
  schedule_every_ = every;
}

absl::StatusOr<checkpoint::TrainingProgress> TrainingLoop::Resume() {
  if (start_.has_value()) return *start_;
  if (options_.grad_scaler.has_value() && !scaler_.has_value()) {
    if (strategy_.full_optimizer() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          options_.who,
          ": a GradScaler steps the whole model's optimizer; the sharded "
          "strategies (zero1, zero2, fsdp) hold shards of it: use none (DDP) "
          "or drop the scaler"));
    }
    TANDEM_ASSIGN_OR_RETURN(scaler_,
                            optim::GradScaler::Create(*options_.grad_scaler));
    scaler_->set_found_inf_combiner(
        FoundInfAcrossRanks(comm_, options_.device));
  }
  absl::StatusOr<checkpoint::TrainingProgress> resumed =
      checkpointer_.Resume(state_);
  const std::string& model = options_.model_description;
  if (!resumed.ok() && !model.empty()) {
    return absl::Status(
        resumed.status().code(),
        absl::StrCat(resumed.status().message(), " (", options_.who,
                     ": this run's model is ", model,
                     "; a checkpoint folder holds one configuration's run: "
                     "use a fresh --checkpoint_dir)"));
  }
  TANDEM_ASSIGN_OR_RETURN(const checkpoint::TrainingProgress start, resumed);
  if (start.global_step > 0) {
    if (scaler_.has_value()) {
      TANDEM_ASSIGN_OR_RETURN(const optim::GradScalerState saved,
                              ScalerStateFromExtra(state_.extra, options_.who));
      TANDEM_RETURN_IF_ERROR(scaler_->LoadStateDict(saved));
    }
    if (scheduler_ != nullptr) {
      TANDEM_RETURN_IF_ERROR(
          scheduler_->LoadStateDict(SchedulerState(state_.extra)));
    }
    if (!model.empty()) {
      auto it = state_.extra.find(ModelKey());
      const std::string saved = it == state_.extra.end() ? "none" : it->second;
      if (saved != model) {
        return absl::InvalidArgumentError(
            absl::StrCat(options_.who, ": the checkpoint in ",
                         options_.checkpoint.dir, " was written by the model ",
                         saved, "; this run's model is ", model,
                         "; resume with that configuration or use a fresh "
                         "--checkpoint_dir"));
      }
    }
  }
  start_ = start;
  return start;
}

absl::Status TrainingLoop::Save(int64_t epoch, int64_t step, int64_t steps,
                                const LoopHooks& hooks, bool run_ends) {
  state_.extra.clear();
  const bool due = checkpointer_.SaveDueAfter(step, steps, run_ends);
  if (due && step + 1 < steps && !options_.epoch_sums.empty()) {
    // Keyed by rank, or by virtual rank in the virtual world.
    std::vector<double> mine = sums_;
    if (strategy_.virtual_world().on()) {
      mine.clear();
      for (const std::vector<double>& v : virtual_sums_) {
        mine.insert(mine.end(), v.begin(), v.end());
      }
    }
    TANDEM_ASSIGN_OR_RETURN(
        state_.extra,
        GatherRankValues(comm_, options_.device, options_.who, SumsPrefix(),
                         options_.epoch_sums, mine));
  }
  if (due && step + 1 < steps && hooks.mid_epoch_extra) {
    TANDEM_ASSIGN_OR_RETURN(checkpoint::Metadata extra,
                            hooks.mid_epoch_extra());
    state_.extra.merge(extra);
  }
  for (const auto& [key, value] : options_.checkpoint_extra) {
    state_.extra[key] = value;
  }
  if (!options_.model_description.empty()) {
    state_.extra[ModelKey()] = options_.model_description;
  }
  if (scaler_.has_value())
    ScalerStateToExtra(scaler_->StateDict(), state_.extra);
  if (scheduler_ != nullptr) {
    for (const auto& [key, value] : scheduler_->StateDict()) {
      state_.extra[kSchedulerPrefix + key] = value;
    }
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
  absl::Status saved =
      checkpointer_.AfterStep(state_, epoch, step, steps, run_ends);
  state_.full = nullptr;
  full_ = {};
  return saved;
}

absl::StatusOr<double> TrainingLoop::ForwardBackward(const Tensor& features,
                                                     const Tensor& labels,
                                                     const LossFn& loss_fn,
                                                     bool sync,
                                                     StepView& view) {
  const int64_t parts = options_.grad_accum;
  Tensor loss;
  double loss_sum = 0;  // of the micro-batches' losses (parts > 1)
  for (int64_t m = 0; m < parts; ++m) {
    Tensor x = features;
    Tensor y = labels;
    if (parts > 1) {
      TANDEM_ASSIGN_OR_RETURN(x, MicroBatch(features, m, parts, options_.who));
      TANDEM_ASSIGN_OR_RETURN(y, MicroBatch(labels, m, parts, options_.who));
    }
    // DDP's NoSync for every micro-batch but the last (for every one when
    // the virtual world sums the gradients instead).
    std::optional<DistributedDataParallel::NoSyncGuard> no_sync =
        m + 1 < parts || !sync ? strategy_.NoSync() : std::nullopt;
    {
      // Forward and loss under autocast; backward outside it, as in
      // PyTorch's recipe.
      std::optional<amp::Autocast> autocast;
      if (options_.autocast.has_value()) {
        autocast.emplace(options_.device.type(), *options_.autocast);
      }
      TANDEM_ASSIGN_OR_RETURN(view.output, strategy_.Forward(x));
      TANDEM_ASSIGN_OR_RETURN(loss, loss_fn(view.output, y));
    }
    if (m == 0) strategy_.ZeroGrad();
    if (parts > 1) {
      TANDEM_ASSIGN_OR_RETURN(const double v, loss.Item());
      loss_sum += v;
      TANDEM_ASSIGN_OR_RETURN(loss, Div(loss, static_cast<double>(parts)));
    }
    if (scaler_.has_value()) {
      TANDEM_ASSIGN_OR_RETURN(Tensor scaled, scaler_->Scale(loss));
      TANDEM_RETURN_IF_ERROR(strategy_.Backward(scaled));
    } else {
      TANDEM_RETURN_IF_ERROR(strategy_.Backward(loss));
    }
  }
  if (parts > 1) return loss_sum / static_cast<double>(parts);
  return loss.Item();
}

absl::Status TrainingLoop::OptimizerStep(const LoopHooks& hooks,
                                         StepView& view) {
  if (hooks.before_optimizer_step) {
    TANDEM_RETURN_IF_ERROR(hooks.before_optimizer_step(view));
  }
  if (options_.max_grad_norm > 0) {
    // The true gradients are clipped: unscaled first (Step then does not
    // unscale again).
    if (scaler_.has_value()) {
      TANDEM_RETURN_IF_ERROR(scaler_->Unscale(*strategy_.full_optimizer()));
    }
    TANDEM_RETURN_IF_ERROR(
        strategy_.ClipGradNorm(options_.max_grad_norm).status());
  }
  if (scaler_.has_value()) {
    view.loss_scale = scaler_->scale();
    TANDEM_ASSIGN_OR_RETURN(const bool stepped,
                            scaler_->Step(*strategy_.full_optimizer()));
    view.skipped = !stepped;
    TANDEM_RETURN_IF_ERROR(scaler_->Update());
  } else {
    TANDEM_RETURN_IF_ERROR(strategy_.Step());
  }
  return absl::OkStatus();
}

absl::Status TrainingLoop::TrainStep(const Tensor& features,
                                     const Tensor& labels,
                                     const LossFn& loss_fn,
                                     const LoopHooks& hooks, StepView& view) {
  TANDEM_ASSIGN_OR_RETURN(view.loss, ForwardBackward(features, labels, loss_fn,
                                                     /*sync=*/true, view));
  return OptimizerStep(hooks, view);
}

absl::Status TrainingLoop::VirtualStep(const LossFn& loss_fn,
                                       const LoopHooks& hooks,
                                       std::vector<StepView>& views) {
  const VirtualWorld& vw = strategy_.virtual_world();
  std::vector<double> losses(vw.local);
  for (int64_t v = 0; v < vw.local; ++v) {
    StepView& view = views[v];
    if (options_.reseed_each_step != nullptr) {
      options_.reseed_each_step->ManualSeed(
          StepSeed(view.global_step, view.rank));
    }
    if (hooks.begin_step) TANDEM_RETURN_IF_ERROR(hooks.begin_step(view));
    TANDEM_ASSIGN_OR_RETURN(Tensor features,
                            OnDevice(view.batch->features, options_.device));
    TANDEM_ASSIGN_OR_RETURN(Tensor labels,
                            OnDevice(view.batch->labels, options_.device));
    TANDEM_ASSIGN_OR_RETURN(
        view.loss,
        ForwardBackward(features, labels, loss_fn, /*sync=*/false, view));
    losses[v] = view.loss;
    TANDEM_RETURN_IF_ERROR(strategy_.FoldVirtualRank());
  }
  TANDEM_RETURN_IF_ERROR(strategy_.ReduceVirtualRanks());
  TANDEM_RETURN_IF_ERROR(OptimizerStep(hooks, views[0]));
  TANDEM_ASSIGN_OR_RETURN(
      const std::vector<double> all,
      GatherVirtualRankValues(comm_, options_.device, vw, losses));
  const double mean = CanonicalTreeSumF64(all) / static_cast<double>(vw.size);
  for (StepView& view : views) {
    view.loss_scale = views[0].loss_scale;
    view.skipped = views[0].skipped;
    view.mean_loss = mean;
  }
  return absl::OkStatus();
}

absl::Status TrainingLoop::SumEpoch() {
  const VirtualWorld& vw = strategy_.virtual_world();
  if (!vw.on()) {
    return AllReduceF64(comm_, options_.device, absl::MakeSpan(sums_),
                        comm::ReduceOp::kSum);
  }
  // Each sum over the K virtual ranks, by the tree.
  for (size_t i = 0; i < sums_.size(); ++i) {
    std::vector<double> mine;
    for (const std::vector<double>& v : virtual_sums_) mine.push_back(v[i]);
    TANDEM_ASSIGN_OR_RETURN(
        const std::vector<double> all,
        GatherVirtualRankValues(comm_, options_.device, vw, mine));
    sums_[i] = CanonicalTreeSumF64(all);
  }
  return absl::OkStatus();
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
  if (options_.max_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.who,
                     ": max_steps must be >= 0 (0: no limit); "
                     "found ",
                     options_.max_steps));
  }
  if (options_.grad_accum < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(options_.who, ": grad_accum must be >= 1; found ",
                     options_.grad_accum));
  }
  if (options_.position_by_global_step && options_.max_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_.who,
        ": a run positioned by its global step is one schedule of max_steps "
        "steps; max_steps is ",
        options_.max_steps, ": set it >= 1"));
  }
  const VirtualWorld& vw = strategy_.virtual_world();
  if (options_.virtual_world != 0 && options_.virtual_world != vw.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_.who, ": LoopOptions::virtual_world is ",
        options_.virtual_world, " but the strategy plays ", vw.size,
        " virtual ranks: create the strategy with the same virtual_world"));
  }
  if (data.replicas() != vw.local) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_.who, " on rank ", comm_.rank(), ": the data gives batches of ",
        data.replicas(), " (virtual) rank(s) per step and this rank plays ",
        vw.local,
        vw.on() ? absl::StrCat(" of the ", vw.size, " virtual ranks")
                : std::string(""),
        ": build the data for the same virtual world (e.g. "
        "SampledBatches::Create(..., virtual_world))"));
  }
  TANDEM_ASSIGN_OR_RETURN(checkpoint::TrainingProgress start, Resume());
  // Steps per epoch, when the run is placed by its global step (-1: not
  // known, or not so placed).
  int64_t per_epoch = -1;
  if (options_.position_by_global_step && start.global_step > 0) {
    TANDEM_ASSIGN_OR_RETURN(per_epoch, data.BeginEpoch(0));
    if (per_epoch < 1) {
      return absl::FailedPreconditionError(
          absl::StrCat(options_.who, ": the data gives no steps in an epoch"));
    }
    start.epoch = start.global_step / per_epoch;
    start.step_in_epoch = start.global_step % per_epoch;
  }
  const comm::RankPrinter printer(comm_);
  const Device device = options_.device;
  int64_t global_step = start.global_step;
  auto limit_reached = [&] {
    return options_.max_steps > 0 && global_step >= options_.max_steps;
  };
  // The runner's progress line and metrics file (rank 0 reports).
  RunMonitor* const monitor = comm_.rank() == 0 ? ActiveRunMonitor() : nullptr;
  for (int64_t epoch = start.epoch; epoch < options_.epochs && !limit_reached();
       ++epoch) {
    TANDEM_ASSIGN_OR_RETURN(const int64_t steps, data.BeginEpoch(epoch));
    if (per_epoch >= 0 && steps != per_epoch) {
      return absl::FailedPreconditionError(absl::StrCat(
          options_.who, ": epoch ", epoch + 1, " has ", steps,
          " steps and epoch 1 ", per_epoch,
          "; a run positioned by its global step needs epochs of one length"));
    }
    model_.Train();
    const int64_t first_step = epoch == start.epoch ? start.step_in_epoch : 0;
    sums_.assign(options_.epoch_sums.size(), 0.0);
    virtual_sums_.assign(vw.on() ? vw.local : 0, sums_);
    if (first_step > 0 && !sums_.empty()) {
      // Resumed mid-epoch: this rank's sums of the steps already taken (in
      // the virtual world, each of its virtual ranks').
      if (vw.on()) {
        for (int64_t v = 0; v < vw.local; ++v) {
          TANDEM_ASSIGN_OR_RETURN(
              virtual_sums_[v],
              RankValues(state_.extra, options_.who, SumsPrefix(),
                         options_.epoch_sums, static_cast<int>(vw.rank_of(v))));
        }
      } else {
        TANDEM_ASSIGN_OR_RETURN(
            sums_, RankValues(state_.extra, options_.who, SumsPrefix(),
                              options_.epoch_sums, comm_.rank()));
      }
    }
    if (hooks.begin_epoch) {
      TANDEM_RETURN_IF_ERROR(hooks.begin_epoch(epoch, first_step));
    }
    for (int64_t b = first_step; b < steps && !limit_reached(); ++b) {
      // One view per (virtual) rank this rank plays: one when off.
      virtual_batches_.resize(vw.local);
      std::vector<StepView> views(vw.local);
      for (int64_t v = 0; v < vw.local; ++v) {
        TANDEM_ASSIGN_OR_RETURN(virtual_batches_[v],
                                data.GetReplicaBatch(b, v));
        views[v] = {.epoch = epoch,
                    .step = b,
                    .steps_in_epoch = steps,
                    .batch = &virtual_batches_[v],
                    .global_step = global_step,
                    .sums = vw.on() ? &virtual_sums_[v] : &sums_,
                    .rank = vw.rank_of(v),
                    .first_on_rank = v == 0};
      }
      const auto started = std::chrono::steady_clock::now();
      if (options_.lr_at) TANDEM_RETURN_IF_ERROR(SetLr(global_step));
      if (vw.on()) {
        TANDEM_RETURN_IF_ERROR(VirtualStep(loss_fn, hooks, views));
      } else {
        StepView& view = views[0];
        TANDEM_ASSIGN_OR_RETURN(Tensor features,
                                OnDevice(view.batch->features, device));
        TANDEM_ASSIGN_OR_RETURN(Tensor labels,
                                OnDevice(view.batch->labels, device));
        if (options_.reseed_each_step != nullptr) {
          options_.reseed_each_step->ManualSeed(
              StepSeed(global_step, comm_.rank()));
        }
        if (hooks.begin_step) TANDEM_RETURN_IF_ERROR(hooks.begin_step(view));
        TANDEM_RETURN_IF_ERROR(
            TrainStep(features, labels, loss_fn, hooks, view));
        if (options_.mean_loss_over_ranks) {
          std::vector<double> sum = {view.loss};
          TANDEM_RETURN_IF_ERROR(SumOverRanks(comm_, device, sum));
          view.mean_loss = sum[0] / comm_.size();
        }
      }
      const double seconds = std::chrono::duration<double>(
                                 std::chrono::steady_clock::now() - started)
                                 .count();
      for (StepView& v : views) v.seconds = seconds;
      ++global_step;
      if (hooks.after_step) {
        for (StepView& v : views) {
          TANDEM_RETURN_IF_ERROR(hooks.after_step(v));
        }
      }
      TANDEM_RETURN_IF_ERROR(printer_.Flush());
      // The step's loss as the monitor and the finite check see it: this
      // rank's, or the mean over ranks (always in the virtual world, where
      // every rank must report the same).
      const StepView& view = views[0];
      const double step_loss =
          vw.on() || options_.mean_loss_over_ranks ? view.mean_loss : view.loss;
      const Batch& batch = *view.batch;
      if (monitor != nullptr) {
        // Every rank's batch has this size (the sampler pads evenly).
        StepReport report = WithCommTimes(
            strategy_.ddp(), {.epoch = epoch,
                              .epochs = options_.epochs,
                              .step = b,
                              .steps_per_epoch = steps,
                              .samples = batch.labels.dim(0) *
                                         (vw.on() ? vw.size : comm_.size()),
                              .loss = step_loss,
                              .loss_scale = view.loss_scale,
                              .skipped = view.skipped});
        if (options_.position_by_global_step) {
          // The run is one schedule: one epoch of max_steps steps.
          report.epoch = 0;
          report.epochs = 1;
          report.step = view.global_step;
          report.steps_per_epoch = options_.max_steps;
        }
        if (hooks.step_report) hooks.step_report(view, report);
        monitor->Step(report);
      }
      // Every rank stops together on a non-finite loss (every step, unless
      // the scaler skipped it) or parameter (scanned every
      // kParameterCheckInterval steps and at the end of the epoch; under
      // fsdp the parameters live in shards between steps, so only the loss
      // is checked).
      TANDEM_RETURN_IF_ERROR(
          CheckStepFinite(
              comm_, model_,
              {.epoch = epoch,
               .step = b,
               .loss = vw.on() ? view.mean_loss : view.loss,
               .outcome =
                   view.skipped ? StepOutcome::kSkipped : StepOutcome::kApplied,
               .check_parameters = strategy_.parameters_resident() &&
                                   ParameterCheckDue(b, steps)})
              .status());
      if (hooks.after_checked_step) {
        for (const StepView& v : views) {
          TANDEM_RETURN_IF_ERROR(hooks.after_checked_step(v));
        }
        TANDEM_RETURN_IF_ERROR(printer_.Flush());
      }
      if (scheduler_ != nullptr &&
          (schedule_every_ == ScheduleEvery::kStep || b + 1 == steps)) {
        TANDEM_RETURN_IF_ERROR(scheduler_->Step());
      }
      // A run placed by its global step saves its last step as the end of
      // its epoch (Resume places it by the global step).
      // Any other run stopped by its step limit saves where it stands, so a
      // run given --max_steps and --checkpoint_dir always leaves one.
      const bool last = options_.position_by_global_step && limit_reached();
      TANDEM_RETURN_IF_ERROR(Save(epoch, b, last ? b + 1 : steps, hooks,
                                  /*run_ends=*/limit_reached()));
    }
    if (!sums_.empty()) TANDEM_RETURN_IF_ERROR(SumEpoch());
    if (hooks.end_epoch) {
      TANDEM_ASSIGN_OR_RETURN(EpochEnd end, hooks.end_epoch(epoch, steps));
      if (monitor != nullptr) {
        end.report.epoch = epoch;
        end.report.epochs = options_.epochs;
        monitor->Epoch(end.report);
        if (end.test.has_value()) {
          monitor->Test(end.test->accuracy, end.test->correct, end.test->total);
        }
      }
      if (!end.rank0_line.empty()) printer.PrintOnRank0(end.rank0_line);
      TANDEM_RETURN_IF_ERROR(printer_.Flush());
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
