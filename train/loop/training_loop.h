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
//     runner's RunMonitor (train/examples/run_monitor.h), DDP's
//     communication times included;
//   - the finite check: every rank stops together on a non-finite loss
//     (every step) or parameter (every kParameterCheckInterval steps and at
//     the end of each epoch, while the parameters are resident);
//   - AMP: forward and loss under autocast in LoopOptions::autocast, backward
//     outside it (PyTorch's recipe);
//   - gradient clipping (LoopOptions::max_grad_norm) in every strategy.
//
//   TrainingLoop loop(comm, *model, *strategy,
//                     {.who = "toy_ddp", .epochs = 3, .device = device,
//                      .checkpoint = config.checkpoint});
//   TANDEM_ASSIGN_OR_RETURN(SampledBatches data, SampledBatches::Create(
//       train_set, comm, batch_size, /*drop_last=*/true));
//   TANDEM_RETURN_IF_ERROR(loop.Run(data, CrossEntropyLoss(),
//       {.after_step = [&](const StepView& s) { ...print...; return Ok; }}));
//
// Each step: the batch is copied to the device, forward and loss (under
// autocast), ZeroGrad, Backward, clipping, Step, the loss read back; then
// hooks.after_step (the example's line), the monitor, the finite check and
// the checkpoint, in that order. Collective (every rank runs the same
// epochs and steps); one per rank, used by that rank's thread only; the
// communicator, model and strategy outlive it.
#ifndef TANDEM_TRAIN_LOOP_TRAINING_LOOP_H_
#define TANDEM_TRAIN_LOOP_TRAINING_LOOP_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/data/data_loader.h"
#include "train/data/dataset.h"
#include "train/data/distributed_sampler.h"
#include "train/examples/run_monitor.h"
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
};

// A TensorDataset through a DistributedSampler (PyTorch's defaults: shuffle,
// seed 0, SetEpoch every epoch): this rank's shard, in batches of
// `batch_size` (drop_last as given).
class SampledBatches : public EpochBatches {
 public:
  // `data` is copied (its tensors are shared, not their elements).
  // Errors: DistributedSampler's and DataLoader's argument checks.
  static absl::StatusOr<SampledBatches> Create(const TensorDataset& data,
                                               const comm::Communicator& comm,
                                               int64_t batch_size,
                                               bool drop_last);
  absl::StatusOr<int64_t> BeginEpoch(int64_t epoch) override;
  absl::StatusOr<Batch> GetBatch(int64_t step) override;
  // Samples per epoch over every rank (the sampler pads each rank's shard
  // to the same size): DistributedSampler::total_size().
  int64_t total_size() const { return sampler_.total_size(); }
  // The loader of the epoch BeginEpoch prepared (e.g. for an evaluation
  // over the last epoch's order); FailedPrecondition before BeginEpoch.
  absl::StatusOr<const DataLoader*> loader() const;

 private:
  SampledBatches(TensorDataset data, DistributedSampler sampler,
                 int64_t batch_size, bool drop_last)
      : data_(std::move(data)),
        sampler_(std::move(sampler)),
        batch_size_(batch_size),
        drop_last_(drop_last) {}

  TensorDataset data_;
  DistributedSampler sampler_;
  int64_t batch_size_;
  bool drop_last_;
  std::optional<DataLoader> loader_;
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
};

// What the after_step hook sees of a step just taken.
struct StepView {
  int64_t epoch = 0;  // 0-based
  int64_t step = 0;   // 0-based within the epoch
  int64_t steps_in_epoch = 0;
  const Batch* batch = nullptr;  // as EpochBatches gave it (host)
  Tensor output{};               // the model's output (on the device)
  double loss = 0;               // this rank's loss
};

// What the end_epoch hook returns: the epoch's report for the monitor
// (epoch and epochs are filled in by the loop), and a line rank 0 prints
// after it (none when empty).
struct EpochEnd {
  EpochReport report{};
  std::string rank0_line{};
};

// The example's part of the loop. Every hook is optional; an error ends the
// run with it (on this rank: hooks that communicate fail every rank only if
// they do so themselves).
struct LoopHooks {
  // Before the first step of each epoch; first_step > 0 when the run
  // resumed in the middle of it (TrainingLoop::resumed_extra() then holds
  // what mid_epoch_extra gave the checkpoint).
  std::function<absl::Status(int64_t epoch, int64_t first_step)> begin_epoch;
  // After each step (the example's per-step line, its running sums).
  std::function<absl::Status(const StepView& step)> after_step;
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

  // Every rank, collective when checkpoints are on: restores the model and
  // the optimizer (the full state, sliced for a sharded strategy) from a
  // checkpoint in options.checkpoint.dir, if any (rank 0 says so), and
  // returns where the run starts. Run calls it when the example did not.
  absl::StatusOr<checkpoint::TrainingProgress> Resume();
  // The checkpoint's extra metadata after Resume (empty without one).
  const checkpoint::Metadata& resumed_extra() const { return state_.extra; }

  // Trains from where Resume left (every epoch from 0 without a
  // checkpoint) to options.epochs. The model is in training mode during
  // the epochs and left so. Errors: the hooks', the data's, the strategy's,
  // a non-finite loss or parameter (FailedPrecondition from
  // CheckStepFinite, the same on every rank), a failed save.
  absl::Status Run(EpochBatches& data, const LossFn& loss,
                   const LoopHooks& hooks = {});

 private:
  absl::Status Save(int64_t epoch, int64_t step, int64_t steps,
                    const LoopHooks& hooks);

  comm::Communicator& comm_;
  nn::Module& model_;
  Strategy& strategy_;
  LoopOptions options_;
  checkpoint::RunCheckpointer checkpointer_;
  checkpoint::TrainingState state_;
  checkpoint::FullTrainingState full_;
  std::optional<checkpoint::TrainingProgress> start_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_TRAINING_LOOP_H_
