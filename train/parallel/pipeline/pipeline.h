// train/parallel/pipeline: model parallelism across ranks: a model's stages
// on different ranks, micro-batches flowing through them over Send/Recv
// (GPipe, 1F1B), composable with DDP over sub-communicators. The engine is
// this header; docs/pipeline.md.
//
// PipelineStage: pipeline parallelism across ranks, after
// torch.distributed.pipelining (PipelineStage + ScheduleGPipe /
// Schedule1F1B). Rank i of a communicator holds stage i of a model split
// into comm.size() consecutive pieces; each batch is split into `chunks`
// micro-batches that flow forward stage to stage as activations and back as
// activation gradients, over the Communicator's Send/Recv. (Pipe, in
// train/parallel/devices/pipe.h, is the single-process form over devices.)
//
//   // every rank: its own piece of the model (rank 0 the first layers)
//   TANDEM_ASSIGN_OR_RETURN(
//       auto stage, train::PipelineStage::Create(
//                       comm, *my_layers,
//                       {.schedule = train::PipelineSchedule::k1F1B,
//                        .chunks = 4},
//                       [](const Tensor& y, const Tensor& t) {
//                         return Mse(y, t);
//                       }));
//   model.ZeroGrad();
//   // rank 0 passes the batch, the last rank the targets, others {}
//   TANDEM_ASSIGN_OR_RETURN(PipelineStepResult r, stage->Step(x, target));
//   TANDEM_RETURN_IF_ERROR(sgd.Step());   // each rank its own stage
//   // r.loss: the mean micro-batch loss, on the last stage only
//
// Schedules (what each stage runs, in order; p stages, m micro-batches,
// this stage i; PipelineOrder gives the list):
//   * kGPipe: forward of micro-batches 0..m-1, then their backward 0..m-1.
//     Stage i keeps the activations of all m micro-batches at once.
//   * k1F1B: a warm-up of w = min(p - 1 - i, m) forwards, then alternately
//     one forward and one backward, then the remaining backwards. Stage i
//     keeps at most min(p - i, m) micro-batches' activations at once.
// Both run backwards in micro-batch order 0..m-1, so a stage accumulates
// its parameter gradients in the same order under either schedule: the
// gradients are bitwise identical, and bitwise equal to the unsplit model
// run micro-batch by micro-batch with the same loss and scaling.
//
// Conventions (torch.distributed.pipelining's):
//   * Micro-batches are torch.tensor_split's pieces of the batch rows
//     (9 rows, 4 chunks: 3, 2, 2, 2). A batch with fewer rows than chunks is
//     an error (PyTorch's schedule fails there too).
//   * The loss is computed per micro-batch on the last stage; each
//     micro-batch's loss is back-propagated unscaled, and after the last
//     backward every parameter gradient is divided by the number of
//     micro-batches (PyTorch's scale_grads=True, grad.div_(m)); with
//     PipelineOptions::scale_grads = false the gradients are the sum.
//     Gradients accumulate into what the parameters already hold: zero
//     them between steps, as with any optimizer.
//
// Wire protocol: shapes are sent as a header. Each forward message is two
// Sends to the next stage: a header of kPipelineHeaderLength int64 values
// (the activation's comm dtype, its number of dims, the dims, zero-padded)
// and then the activation. A backward message is one Send of the
// activation gradient to the previous stage; its shape is the receiving
// stage's own output shape for that micro-batch, so it needs no header.
// Sends are issued without waiting and waited at the end of the step;
// every wait is a Recv the schedule needs next, so a valid schedule cannot
// deadlock. Every tensor goes through tensor_comm's ToBufferView on the
// stage's device (headers too, so a device-only engine like NCCL works).
//
// Agreement: every Step starts with one small all-gather in which each rank
// publishes its schedule, chunks, stage count, and what it knows of the
// micro-batch shape (stage 0: the batch's rows and row size; the last
// stage: the target's rows). Any disagreement fails Step on every rank with
// the same InvalidArgument naming the ranks and both values, before any
// activation moves, e.g.
//   pipeline ranks disagree on the schedule: rank 0 has gpipe and rank 1
//   has 1f1b; give every rank the same PipelineOptions
//
// Contract: Step is collective over `comm` (every rank calls it, the same
// number of times). The module and communicator must outlive the stage; a
// stage belongs to its rank's thread. Blocking: Step returns when this
// stage's work for the step is done and its sends delivered; every wait is
// bounded by PipelineOptions::timeout (and the engine's own timeout). No
// detached threads. Errors are Status values naming the stage, rank and
// micro-batch; after an error the other ranks fail too (their Recvs time
// out or the engine aborts them), never hang.
#ifndef TANDEM_TRAIN_PARALLEL_PIPELINE_PIPELINE_H_
#define TANDEM_TRAIN_PARALLEL_PIPELINE_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/work.h"
#include "tensor/device.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::train {

enum class PipelineSchedule { kGPipe, k1F1B };

// "gpipe", "1f1b"; InvalidArgument listing them otherwise.
absl::StatusOr<PipelineSchedule> ParsePipelineSchedule(std::string_view name);
std::string_view PipelineScheduleName(PipelineSchedule schedule);

// One step of a stage's program.
struct PipelineAction {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int64_t micro_batch = 0;
  bool operator==(const PipelineAction&) const = default;
};

// The actions stage `stage` of `stages` runs for `micro_batches`, in order
// (see the schedules above). Requires 0 <= stage < stages, micro_batches
// >= 1.
std::vector<PipelineAction> PipelineOrder(PipelineSchedule schedule,
                                          int64_t stages, int64_t stage,
                                          int64_t micro_batches);

// The number of int64 values of a forward message's header (dtype, ndim and
// up to 8 dims).
inline constexpr int64_t kPipelineHeaderLength = 10;

// The loss of one micro-batch on the last stage: a one-element tensor.
using PipelineLossFn = std::function<absl::StatusOr<Tensor>(
    const Tensor& output, const Tensor& target)>;

struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::kGPipe;
  int64_t chunks = 1;  // micro-batches per batch, >= 1
  // Divide the gradients by the number of micro-batches after the last
  // backward (PyTorch's default); false keeps the sum.
  bool scale_grads = true;
  // Bounds every wait of a Step (each Recv, each Send, the agreement).
  absl::Duration timeout = absl::Minutes(5);
  // Gradient synchronisation over a second dimension (2-D parallelism:
  // each stage replicated, DDP over the replicas of a stage). When set,
  // before_last_backward runs right before this stage's last backward of
  // the step and after_last_backward right after it, before the gradients
  // are scaled, as torch.distributed.pipelining does with DDP (no_sync for
  // every backward but the last, prepare_for_backward before it). With
  // DDP: ddp->PrepareForBackward() and ddp->FinishGradientSync(), the
  // stage running the module directly (PipelineStage::Create gets the
  // module, not the DDP). Errors come back from Step.
  std::function<absl::Status()> before_last_backward = nullptr;
  std::function<absl::Status()> after_last_backward = nullptr;
};

struct PipelineStepResult {
  int64_t micro_batches = 0;
  // Last stage only: each micro-batch's loss and their mean (what
  // torch.distributed.pipelining's `losses` holds, and what examples print).
  std::vector<double> micro_batch_losses;
  std::optional<double> loss;
  // The most micro-batches whose forward state (activations kept for
  // backward) this stage held at once during the step.
  int64_t peak_live_micro_batches = 0;
};

class PipelineStage {
 public:
  // Stage comm.rank() of comm.size(). `module` is this rank's piece of the
  // model; `loss` is needed on the last stage (ignored elsewhere).
  // Errors: chunks < 1, a non-positive timeout, no loss on the last stage.
  // Not collective (the agreement runs at each Step).
  static absl::StatusOr<std::unique_ptr<PipelineStage>> Create(
      comm::Communicator& comm, nn::Module& module, PipelineOptions options,
      PipelineLossFn loss = nullptr);

  // One training step's forward and backward (see the header comment).
  // Stage 0 passes the batch as `input`, the last stage the targets as
  // `target` (a single stage passes both); other arguments are ignored
  // and may be undefined. Collective.
  absl::StatusOr<PipelineStepResult> Step(const Tensor& input,
                                          const Tensor& target);

  // The step's loss on every stage: the last stage broadcasts
  // result.loss over the pipeline's communicator (one f64 through the
  // stage's device). Collective; call it after Step on every rank, with
  // that Step's result. Bounded by the timeout.
  absl::StatusOr<double> ShareLoss(const PipelineStepResult& result);

  int stage() const { return stage_; }
  int num_stages() const { return num_stages_; }
  const PipelineOptions& options() const { return options_; }
  // Where the stage computes: its parameters' device (the CPU without
  // parameters); received activations are placed there.
  Device device() const { return device_; }

 private:
  struct MicroBatch;  // one micro-batch's state on this stage
  // A Send in flight and the tensor it reads (kept alive until waited).
  struct PendingSend {
    std::unique_ptr<comm::Work> work;
    Tensor keep;
  };

  PipelineStage(comm::Communicator& comm, nn::Module& module,
                PipelineOptions options, PipelineLossFn loss, Device device);

  // The agreement all-gather; returns the batch's rows (stage 0's).
  absl::StatusOr<int64_t> Agree(const Tensor& input, const Tensor& target);
  absl::Status Forward(MicroBatch& mb, const Tensor& input,
                       const Tensor& target);
  absl::Status Backward(MicroBatch& mb);
  absl::Status SendTensor(const Tensor& t, int peer);
  absl::Status WaitSends();
  absl::Status Annotate(const absl::Status& s, std::string_view what,
                        int64_t micro_batch) const;

  comm::Communicator& comm_;
  nn::Module& module_;
  const PipelineOptions options_;
  const PipelineLossFn loss_;
  const Device device_;
  const int stage_;
  const int num_stages_;
  std::vector<PendingSend> pending_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_PIPELINE_PIPELINE_H_
