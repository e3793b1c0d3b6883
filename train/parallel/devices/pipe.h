// Pipe: model sharding with pipeline parallelism in one process, after
// torch.distributed.pipeline.sync.Pipe (PyTorch 1.13, from torchgpipe).
// A Sequential whose layers already sit on their devices is split into
// consecutive stages, one per device; each batch is split into `chunks`
// micro-batches (torch.chunk) that flow through the stages on the GPipe
// clock-cycle schedule: at clock k, stage j works on micro-batch k - j, all
// stages at once, one worker thread per stage. The output is the
// micro-batches' outputs concatenated on the last stage's device; one
// Backward through it runs the backward schedule in reverse clock order,
// the stages again concurrently.
//
//   // layers 0-1 on sim:0, layers 2-3 on sim:1
//   TANDEM_ASSIGN_OR_RETURN(auto pipe,
//                           train::Pipe::Create(std::move(seq),
//                                               {.chunks = 4}));
//   TANDEM_ASSIGN_OR_RETURN(Tensor y, pipe->Forward(x));   // y on sim:1
//   TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mse(y, target));
//   TANDEM_RETURN_IF_ERROR(loss.Backward());
//
// Activation checkpointing (PipeOptions::checkpoint, PyTorch's names):
// "always" keeps only each stage's input for every micro-batch and
// recomputes the stage's forward in backward; "except_last" (the default)
// does so for all but the last micro-batch, whose backward comes first;
// "never" keeps every activation. Values are identical in every mode (the
// recomputation is the same arithmetic); memory is what changes, see
// docs/devices.md for the measured saving.
//
// How it works: every (micro-batch, stage) cell runs on a detached copy of
// its input, so each cell's autograd graph belongs to one worker thread; the
// output carries one autograd node whose backward feeds each cell's output
// gradient into that cell's graph (Tensor::Backward, which accumulates the
// stage's parameter gradients on its device) and passes the cell's input
// gradient to the stage before. Parameters are accumulated micro-batch by
// micro-batch in reverse order, on a fixed schedule: deterministic.
//
// Contract: the Pipe must outlive the Backward of its outputs; backward
// each Forward's result at most once. Post-accumulate-grad hooks of the
// parameters run once per micro-batch (each cell's backward is a Backward
// call) and once more at the end. Errors are Status values, never a hang:
// not a Sequential, no layers, a layer whose tensors sit on two devices,
// stages not in device order (a device whose layers are not consecutive),
// chunks < 1 or larger than the batch, a stage that fails (its index,
// device, layers, micro-batch and input shape named: e.g. a stage whose
// input shape is not what the previous stage produced), a stage that
// outlives PipeOptions::timeout. A Pipe belongs to one thread.
#ifndef TANDEM_TRAIN_PARALLEL_DEVICES_PIPE_H_
#define TANDEM_TRAIN_PARALLEL_DEVICES_PIPE_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tensor/device.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"
#include "train/parallel/devices/device_workers.h"

namespace tandem::train {

enum class PipeCheckpoint { kAlways, kExceptLast, kNever };

// "always", "except_last", "never"; InvalidArgument listing them otherwise.
absl::StatusOr<PipeCheckpoint> ParsePipeCheckpoint(std::string_view name);
std::string_view PipeCheckpointName(PipeCheckpoint mode);

struct PipeOptions {
  int64_t chunks = 1;  // micro-batches per batch, >= 1
  PipeCheckpoint checkpoint = PipeCheckpoint::kExceptLast;
  // Bounds each clock cycle's wait for its stages.
  absl::Duration timeout = absl::Minutes(5);
};

// The micro-batch each stage works on at each clock cycle of GPipe's
// schedule (torchgpipe's clock_cycles): cycle k holds (k - j, j) for every
// stage j with 0 <= k - j < micro_batches; micro_batches + stages - 1
// cycles. Pairs are (micro-batch, stage).
std::vector<std::vector<std::pair<int64_t, int64_t>>> GpipeClockCycles(
    int64_t micro_batches, int64_t stages);

class Pipe : public nn::Module {
 public:
  struct Stage {
    Device device;
    int64_t first_layer = 0;  // index into the Sequential
    int64_t num_layers = 0;
  };

  // Takes ownership of `module` (registered as the child "module").
  static absl::StatusOr<std::unique_ptr<Pipe>> Create(
      std::unique_ptr<nn::Module> module, PipeOptions options);

  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "Pipe"; }

  const std::vector<Stage>& stages() const { return stages_; }
  const PipeOptions& options() const { return options_; }
  nn::Sequential& module() const { return *module_; }

 private:
  struct Run;  // one Forward's cells, shared with its backward node

  Pipe() = default;
  // Stage j's layers applied in order to `x` (on the stage's device).
  absl::StatusOr<Tensor> RunStage(size_t j, const Tensor& x) const;
  // Stage j's error, named for the user.
  absl::Status StageError(size_t j, int64_t micro_batch, const Tensor& input,
                          const absl::Status& error) const;
  absl::Status Backward(Run& run, const Tensor& grad, Tensor& input_grad);

  nn::Sequential* module_ = nullptr;  // owned by the Module base (child)
  PipeOptions options_;
  std::vector<Stage> stages_;
  std::unique_ptr<DeviceWorkers> workers_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DEVICES_PIPE_H_
