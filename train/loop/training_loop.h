// TrainingLoop: the one training loop of the examples. An example states
// its model, its data, its optimizer (through a train::Strategy) and its
// loss, and what it prints; the loop runs the epochs and steps and owns
// what every example used to repeat around them:
//
//   - checkpoints: resume (every rank, before the first step) and saves
//     (train/checkpoint/run_checkpointer.h: --checkpoint_dir,
//     --checkpoint_every), with the full state of a sharded strategy
//     gathered for rank 0 (the files are --shard=none's in every mode);
//   - metrics and progress: rank 0 reports every step and epoch to the
//     runner's RunMonitor (train/loop/run_monitor.h), DDP's
//     communication times included;
//   - the finite check: every rank stops together on a non-finite loss
//     (every step) or parameter (every kParameterCheckInterval steps and at
//     the end of each epoch, while the parameters are resident);
//   - AMP: forward and loss under autocast in LoopOptions::autocast, backward
//     outside it (PyTorch's recipe); with LoopOptions::grad_scaler a
//     GradScaler the loop owns (loss scaled, gradients unscaled before
//     clipping, a step skipped on every rank when any rank found inf/nan,
//     its scale and growth tracker in every checkpoint); DDP's gradient comm
//     hook (StrategyOptions, when TrainingLoop::Create builds the
//     strategy);
//   - learning-rate schedules (SetLrScheduler: stepped per epoch or per
//     step, their state in every checkpoint);
//   - gradient clipping (LoopOptions::max_grad_norm) in every strategy;
//   - a limit on the run's steps (LoopOptions::max_steps);
//   - per-rank epoch sums (LoopOptions::epoch_sums: a mean loss, counts)
//     carried across a mid-epoch resume and summed over the ranks.
//
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<TrainingLoop> loop,
//       TrainingLoop::Create(comm, *model, ShardMode::kNone, SgdFactory(lr),
//                            {.who = "toy_ddp", .epochs = 3,
//                             .device = device,
//                             .checkpoint = config.checkpoint}));
//   TANDEM_ASSIGN_OR_RETURN(SampledBatches data, SampledBatches::Create(
//       train_set, comm, batch_size, /*drop_last=*/true));
//   TANDEM_RETURN_IF_ERROR(loop->Run(data, CrossEntropyLoss(),
//       {.after_step = [&](const StepView& s) { ...print...; return Ok; }}));
//
// Each step: hooks.begin_step, the batch is copied to the device, forward
// and loss (under autocast), ZeroGrad, Backward (of the scaled loss under a
// scaler; per micro-batch under LoopOptions::grad_accum),
// hooks.before_optimizer_step, clipping (after unscaling), Step (through the
// scaler, then its Update), the loss read back; then hooks.after_step (the
// example's line), the monitor, the finite check, hooks.after_checked_step,
// a per-step schedule, an epoch's schedule after its last step, and the
// checkpoint, in that order. Collective (every rank runs the same
// epochs and steps); one per rank, used by that rank's thread only; the
// communicator, model and strategy outlive it.
#ifndef TANDEM_TRAIN_LOOP_TRAINING_LOOP_H_
#define TANDEM_TRAIN_LOOP_TRAINING_LOOP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/optim/grad_scaler.h"
#include "tensor/optim/lr_scheduler.h"
#include "tensor/tensor.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
#include "train/data/distributed_sampler.h"
#include "train/loop/evaluate.h"
#include "train/loop/run_monitor.h"
#include "train/loop/virtual_rank_printer.h"
#include "train/parallel/ddp/comm_hook.h"
#include "train/parallel/strategy.h"

namespace tandem::train {

// The batches of each epoch, as the loop asks for them.
class EpochBatches {
 public:
  virtual ~EpochBatches() = default;
  // Prepares epoch `epoch` (0-based) and returns its number of steps.
  virtual absl::StatusOr<int64_t> BeginEpoch(int64_t epoch) = 0;
  // Step `step` of the epoch BeginEpoch prepared, on the host.
  virtual absl::StatusOr<Batch> GetBatch(int64_t step) = 0;
  // The virtual world (LoopOptions::virtual_world): how many virtual ranks'
  // batches this source gives, one per virtual rank this rank plays, in
  // order; 1 for a source of the rank's own batches.
  virtual int64_t replicas() const { return 1; }
  // Step `step`'s batch of the v-th of those (0 <= v < replicas());
  // GetBatch(step) is v = 0's. InvalidArgument for another v.
  virtual absl::StatusOr<Batch> GetReplicaBatch(int64_t step, int64_t v);
};

// A TensorDataset through a DistributedSampler (PyTorch's defaults: shuffle,
// seed 0, SetEpoch every epoch): this rank's shard, in batches of
// `batch_size` (drop_last as given). In the virtual world (virtual_world >
// 0) one sampler per virtual rank this rank plays: virtual rank k's shard
// is DistributedSampler(num_replicas = K, rank = k)'s, whatever W.
class SampledBatches : public EpochBatches {
 public:
  // `data` is copied (its tensors are shared, not their elements).
  // Errors: DistributedSampler's and DataLoader's argument checks;
  // PlaceVirtualWorld's.
  static absl::StatusOr<SampledBatches> Create(const TensorDataset& data,
                                               const comm::Communicator& comm,
                                               int64_t batch_size,
                                               bool drop_last,
                                               int64_t virtual_world = 0);
  absl::StatusOr<int64_t> BeginEpoch(int64_t epoch) override;
  absl::StatusOr<Batch> GetBatch(int64_t step) override;
  int64_t replicas() const override {
    return static_cast<int64_t>(samplers_.size());
  }
  absl::StatusOr<Batch> GetReplicaBatch(int64_t step, int64_t v) override;
  // Samples per epoch over every (virtual) rank (the sampler pads each
  // shard to the same size): DistributedSampler::total_size().
  int64_t total_size() const { return samplers_[0].total_size(); }
  int64_t batch_size() const { return batch_size_; }
  // The loader of the epoch BeginEpoch prepared for replica v (e.g. for
  // an evaluation over the last epoch's order); FailedPrecondition before
  // BeginEpoch, InvalidArgument for a v out of range.
  absl::StatusOr<const DataLoader*> loader(int64_t v = 0) const;

 private:
  SampledBatches(TensorDataset data, std::vector<DistributedSampler> samplers,
                 int64_t batch_size, bool drop_last)
      : data_(std::move(data)),
        samplers_(std::move(samplers)),
        batch_size_(batch_size),
        drop_last_(drop_last) {}

  TensorDataset data_;
  std::vector<DistributedSampler> samplers_;  // one per replica
  int64_t batch_size_;
  bool drop_last_;
  std::vector<DataLoader> loaders_;  // BeginEpoch's, one per replica
};

struct LoopOptions {
  std::string who{};  // names the run: "toy_ddp" (the resume line, errors)
  int64_t epochs = 0;
  Device device = Device::CPU();  // where the model trains
  checkpoint::CheckpointOptions checkpoint{};
  // Forward and loss under autocast in this dtype (bf16, f16); nullopt: f32.
  std::optional<DType> autocast{};
  // > 0: the gradients are clipped to this total norm between Backward and
  // Step (Strategy::ClipGradNorm: clip_grad_norm_ over the whole model, in
  // every strategy). 0: no clipping. Negative or not finite: Run fails
  // with InvalidArgument before any step.
  double max_grad_norm = 0;
  // A GradScaler with these options (enabled = false: every call a
  // pass-through, its state still checkpointed), its found_inf combined
  // across ranks (train/parallel/core/found_inf.h). It steps the whole model's
  // optimizer: local and none only (Run: InvalidArgument otherwise). Its
  // state rides in every checkpoint's metadata ("grad_scaler.scale_bits":
  // the scale's double bits, "grad_scaler.growth_tracker") and comes back
  // on resume (InvalidArgument when a checkpoint lacks it).
  std::optional<optim::GradScalerOptions> grad_scaler{};
  // Per-rank running sums of each epoch that the loop keeps for the example
  // (their names, e.g. {"loss", "count"}): zeroed when an epoch starts,
  // restored on a mid-epoch resume, carried in mid-epoch checkpoints
  // (rank_values.h: "<who>.epoch_<name>_bits.<rank>"), and summed over
  // every rank before end_epoch runs (epoch_sums()). after_step adds to
  // them (StepView::sums).
  std::vector<const char*> epoch_sums{};
  // > 0: the run stops after this many steps in all (counted from the
  // first epoch, a resumed run's earlier steps included), ending the epoch
  // it stops in (hooks.end_epoch runs). With checkpoints on, the step that
  // reaches the limit is always saved, mid-epoch too. 0: no limit.
  // Negative: Run fails with InvalidArgument.
  int64_t max_steps = 0;
  // Gradient accumulation: each step's batch is cut along its first
  // dimension into this many equal micro-batches (views), each run forward,
  // its loss divided by grad_accum and run backward, all but the last inside
  // the strategy's NoSync; then one clip and one optimizer step. The step's
  // loss (StepView::loss) is the mean of the micro-batches' losses. 1: the
  // whole batch at once. < 1, or a batch whose rows it does not divide:
  // InvalidArgument.
  int64_t grad_accum = 1;
  // Metadata every checkpoint carries, for the example to read back on
  // resume (resumed_extra()).
  checkpoint::Metadata checkpoint_extra{};
  // The model's configuration as text (e.g. GptConfig::ToString()); empty:
  // none. Every checkpoint carries it ("<who>.model") and Resume refuses a
  // checkpoint written by another model (InvalidArgument naming the
  // folder, both models and what to do), before any step; Resume's other
  // errors name this run's model too.
  std::string model_description{};
  // The learning rate of each step (0-based global step), e.g. nanoGPT's
  // warm-up and cosine: set on every parameter group of the rank's
  // optimizer before the step (and its begin_step hook). Empty: the
  // optimizer's own (or SetLrScheduler's).
  std::function<double(int64_t global_step)> lr_at{};
  // A generator the model draws from while it trains (dropout's masks),
  // reseeded before every step (and its begin_step hook) from (step_seed,
  // the rank, the global step): each step's draws are a function of those
  // alone, so a resumed run draws what an uninterrupted one draws with no
  // generator in the checkpoint. Not owned; outlives Run. nullptr: none.
  Generator* reseed_each_step = nullptr;
  uint64_t step_seed = 0;
  // What a resume must match (name, value), recorded in every checkpoint
  // and compared before a resume loads anything (TrainingState::must_match;
  // an example passes MustMatchOnResume of its agreed flags, must_match.h).
  std::vector<std::pair<std::string, std::string>> must_match{};
  // The run is one schedule of steps over epochs of equal length (nanoGPT's
  // max_iters; needs max_steps > 0): its last step is always checkpointed,
  // as the end of its epoch, and Resume's position is the checkpoint's
  // global step alone (epoch global_step / steps per epoch, step
  // global_step % steps per epoch), whatever epoch the checkpoint names, so
  // a run stopped at max_steps resumes inside that epoch when given more
  // steps. An epoch of another length after a resume: FailedPrecondition.
  // The monitor's progress then counts the run's steps as one epoch of
  // max_steps steps (step = the global step).
  bool position_by_global_step = false;
  // Each step's loss averaged over every rank (StepView::mean_loss, also
  // the monitor's loss): the ranks' losses summed in one all-reduce of a
  // double, then divided by the world size. Collective, every step. false:
  // mean_loss stays kUnknown.
  bool mean_loss_over_ranks = false;
  // The virtual world (docs/virtual_world.md): this run computes what DDP
  // at K = virtual_world ranks computes, bit for bit at every allowed world
  // size. Create passes it to the strategy (StrategyOptions::virtual_world);
  // a loop given a strategy takes the strategy's, and Run refuses a
  // different value here. Each step runs this rank's virtual ranks one
  // after the other (their batches from EpochBatches::GetReplicaBatch, the
  // per-step reseed keyed by the virtual rank), sums their gradients in the
  // fixed order (Strategy::ReduceVirtualRanks), then clips and steps once.
  // The hooks that see a step (begin_step, after_step, after_checked_step)
  // run once per virtual rank this rank plays, in order, each with its own
  // StepView (rank, batch, output, loss, sums); before_optimizer_step once,
  // with the first's. mean_loss is the tree mean of the K losses, every
  // step; epoch sums are kept per virtual rank and summed by the tree;
  // checkpoints record K as the data's world size (resume at any allowed
  // W). 0: off.
  int64_t virtual_world = 0;
};

// The most epochs an example takes: far beyond any use of them; more is a
// typo (or INT64_MAX) that would train for ever rather than fail.
inline constexpr int64_t kMaxEpochs = 1000000;

// When the loop steps a learning-rate schedule: after the last step of each
// epoch (PyTorch's scheduler.step() per epoch; not after an epoch cut short
// by max_steps), or after every step.
enum class ScheduleEvery { kEpoch, kStep };

// What the after_step hook sees of a step just taken.
struct StepView {
  int64_t epoch = 0;  // 0-based
  int64_t step = 0;   // 0-based within the epoch
  int64_t steps_in_epoch = 0;
  const Batch* batch = nullptr;  // as EpochBatches gave it (host)
  Tensor output{};               // the model's output (on the device)
  double loss = 0;               // this rank's loss (unscaled)
  int64_t global_step = 0;       // steps before this one, over every epoch
  // This rank's running sums of the epoch (LoopOptions::epoch_sums), for
  // after_step to add to.
  std::vector<double>* sums = nullptr;
  // Under a GradScaler: the scale this step's loss was multiplied by, and
  // whether the scaler skipped the optimizer step. kUnknown and false
  // without one.
  double loss_scale = kUnknown;
  bool skipped = false;
  // The loss averaged over every rank under
  // LoopOptions::mean_loss_over_ranks; kUnknown otherwise.
  double mean_loss = kUnknown;
  // This rank's wall time of the step, from before begin_step to the loss
  // (and mean_loss) read back: the step's throughput, never its result.
  double seconds = 0;
  // Whose step this is: the rank, or in the virtual world the virtual rank
  // (LoopOptions::virtual_world), e.g. for TrainingLoop::printer().
  int64_t rank = 0;
  // Whether this is the first view of the step on this rank (always, when
  // the virtual world is off): where a hook does its once-per-step work
  // (a line of the step's mean loss, a collective evaluation), since the
  // hooks see each virtual rank the rank plays.
  bool first_on_rank = true;
};

// What the end_epoch hook returns: the epoch's report for the monitor
// (epoch and epochs are filled in by the loop), and a line rank 0 prints
// after it (none when empty).
struct EpochEnd {
  EpochReport report{};
  std::string rank0_line{};
  // A held-out score for the monitor, reported after the epoch.
  struct Test {
    double accuracy = 0;
    int64_t correct = 0;
    int64_t total = 0;
  };
  std::optional<Test> test{};
};

// The example's part of the loop. Every hook is optional; an error ends the
// run with it (on this rank: hooks that communicate fail every rank only if
// they do so themselves).
struct LoopHooks {
  // Before each step, ahead of its forward (the batch is set; output, loss
  // and sums not yet): per-step state such as a learning rate or a dropout
  // seed that is a function of StepView::global_step.
  std::function<absl::Status(const StepView& step)> begin_step;
  // Before the first step of each epoch; first_step > 0 when the run
  // resumed in the middle of it (TrainingLoop::resumed_extra() then holds
  // what mid_epoch_extra gave the checkpoint).
  std::function<absl::Status(int64_t epoch, int64_t first_step)> begin_epoch;
  // After each step (the example's per-step line, its running sums).
  std::function<absl::Status(const StepView& step)> after_step;
  // After Backward, before clipping and the optimizer step (the gradients
  // are reduced, and still scaled under a GradScaler; output and loss are
  // set, loss_scale and skipped not yet).
  std::function<absl::Status(const StepView& step)> before_optimizer_step;
  // On rank 0 with a run monitor: adjusts the step's report before the
  // monitor gets it (the loop fills epoch, step, samples, this rank's loss,
  // DDP's communication times and the scaler's scale).
  std::function<void(const StepView& step, StepReport& report)> step_report;
  // After the finite check passed for the step (a line that a failing step
  // must not print).
  std::function<absl::Status(const StepView& step)> after_checked_step;
  // Collective (every rank, the same steps): just before a checkpoint is
  // saved in the middle of an epoch, what the checkpoint carries for the
  // resumed epoch (checkpoint::Metadata: the example's running sums).
  std::function<absl::StatusOr<checkpoint::Metadata>()> mid_epoch_extra;
  // After the last step of each epoch (may communicate).
  std::function<absl::StatusOr<EpochEnd>(int64_t epoch, int64_t steps)>
      end_epoch;
};

// The loss of the model's output against the batch's labels (both on the
// device), e.g. CrossEntropy.
using LossFn = std::function<absl::StatusOr<Tensor>(const Tensor& output,
                                                    const Tensor& labels)>;

// CrossEntropy (tensor/ops.h) as a LossFn.
LossFn CrossEntropyLoss();

class TrainingLoop {
 public:
  // `model` is the module `strategy` wraps.
  TrainingLoop(comm::Communicator& comm, nn::Module& model, Strategy& strategy,
               LoopOptions options);
  // Builds the strategy too (Strategy::Create(mode, model, comm,
  // make_optimizer, strategy), its fsdp_param_dtype defaulting to
  // options.autocast) and owns it. (StrategyOptions is not a LoopOptions
  // field: GCC 12 -O2 warns falsely, maybe-uninitialized, on designated
  // initialisers of a LoopOptions that nests its std::string.)
  // Collective like Strategy::Create; its errors.
  static absl::StatusOr<std::unique_ptr<TrainingLoop>> Create(
      comm::Communicator& comm, nn::Module& model, ShardMode mode,
      const ShardOptimizerFactory& make_optimizer, LoopOptions options,
      StrategyOptions strategy = {});

  Strategy& strategy() const { return strategy_; }
  comm::Communicator& comm() const { return comm_; }
  nn::Module& model() const { return model_; }
  const LoopOptions& options() const { return options_; }

  // The loop steps `scheduler` (built over strategy().full_optimizer() or
  // local_optimizer()) `every` epoch or step, saves its StateDict under
  // "lr_scheduler." in every checkpoint and restores it on resume (call
  // before Resume or Run).
  void SetLrScheduler(std::unique_ptr<optim::LrScheduler> scheduler,
                      ScheduleEvery every);

  // Every rank, collective when checkpoints are on: restores the model and
  // the optimizer (the full state, sliced for a sharded strategy) from a
  // checkpoint in options.checkpoint.dir, if any (rank 0 says so), and
  // returns where the run starts. Run calls it when the example did not.
  absl::StatusOr<checkpoint::TrainingProgress> Resume();
  // The checkpoint's extra metadata after Resume (empty without one).
  const checkpoint::Metadata& resumed_extra() const { return state_.extra; }
  // In end_epoch: the epoch's sums (LoopOptions::epoch_sums) over every
  // rank; elsewhere this rank's running sums.
  const std::vector<double>& epoch_sums() const { return sums_; }
  // Rank 0 reports a held-out score to the runner's monitor (nothing on
  // other ranks or without a monitor).
  void ReportTest(const Score& score) const;

  // Per-rank lines ("[GPUk] ..."), by virtual rank in the virtual world:
  // the loop flushes it after each step's after_step hooks and after
  // end_epoch; an example flushes what it prints outside the loop.
  VirtualRankPrinter& printer() { return printer_; }

  // The GradScaler under LoopOptions::grad_scaler (its state after Resume),
  // nullptr without one.
  const optim::GradScaler* grad_scaler() const {
    return scaler_ ? &*scaler_ : nullptr;
  }

  // Trains from where Resume left (every epoch from 0 without a
  // checkpoint) to options.epochs. The model is in training mode during
  // the epochs and left so. Errors: the hooks', the data's, the strategy's,
  // a non-finite loss or parameter (FailedPrecondition from
  // CheckStepFinite, the same on every rank), a failed save.
  absl::Status Run(EpochBatches& data, const LossFn& loss,
                   const LoopHooks& hooks = {});

 private:
  // After a step: saves when the checkpointer says it is due or `run_ends`
  // (the step limit was reached).
  absl::Status Save(int64_t epoch, int64_t step, int64_t steps,
                    const LoopHooks& hooks, bool run_ends);
  std::string SumsPrefix() const;  // of the epoch sums' checkpoint keys
  std::string ModelKey() const;    // "<who>.model": model_description's key
  absl::Status SetLr(int64_t global_step);  // LoopOptions::lr_at's rate
  // reseed_each_step's seed for (virtual) rank `rank`
  uint64_t StepSeed(int64_t global_step, int64_t rank) const;
  // Forward, loss, backward, the optimizer step (through the scaler), the
  // loss read back; fills view.output, loss, loss_scale and skipped.
  absl::Status TrainStep(const Tensor& features, const Tensor& labels,
                         const LossFn& loss_fn, const LoopHooks& hooks,
                         StepView& view);
  // Forward, loss and backward of one (virtual) rank's batch, micro-batch
  // by micro-batch, all but the last inside NoSync (the last too when
  // `sync` is false); fills view.output and returns the loss (the
  // micro-batches' mean), read back.
  absl::StatusOr<double> ForwardBackward(const Tensor& features,
                                         const Tensor& labels,
                                         const LossFn& loss_fn, bool sync,
                                         StepView& view);
  // Clipping and the optimizer step (through the scaler); fills
  // view.loss_scale and skipped.
  absl::Status OptimizerStep(const LoopHooks& hooks, StepView& view);
  // One step of every virtual rank this rank plays (the virtual world);
  // fills `views` (one per virtual rank, begin_step run) and their
  // mean_loss (the tree mean over the K virtual ranks).
  absl::Status VirtualStep(const LossFn& loss_fn, const LoopHooks& hooks,
                           std::vector<StepView>& views);
  // The epoch's sums over every (virtual) rank, into sums_.
  absl::Status SumEpoch();

  std::unique_ptr<Strategy> owned_strategy_;  // set by Create
  comm::Communicator& comm_;
  nn::Module& model_;
  Strategy& strategy_;
  LoopOptions options_;
  checkpoint::RunCheckpointer checkpointer_;
  checkpoint::TrainingState state_;
  checkpoint::FullTrainingState full_;
  std::optional<checkpoint::TrainingProgress> start_;
  std::optional<optim::GradScaler> scaler_;
  std::unique_ptr<optim::LrScheduler> scheduler_;
  ScheduleEvery schedule_every_ = ScheduleEvery::kEpoch;
  std::vector<double> sums_;  // LoopOptions::epoch_sums' values
  // The virtual world: each local virtual rank's sums and batches.
  std::vector<std::vector<double>> virtual_sums_;
  std::vector<Batch> virtual_batches_;
  VirtualRankPrinter printer_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_TRAINING_LOOP_H_
