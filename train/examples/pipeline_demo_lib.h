// The rank pipeline demo (//train:pipeline_demo) as a function every rank
// runs: an MLP regression whose layers are split into consecutive stages,
// one per rank of a pipeline (train/parallel/pipeline/pipeline.h) run through
// train::Strategy's pipeline mode (Strategy::CreatePipeline), optionally
// replicated `replicas` times with DDP over each stage's replicas (2-D:
// world = stages x replicas, sub-communicators from Communicator::Split).
//
// The model: Linear(8, hidden), then (layers - 2) x Linear(hidden, hidden),
// then Linear(hidden, 1), ReLU between; weights drawn in order from
// Generator(seed) on every rank (each keeps its own stage's layers; layer l
// goes to stage l * stages / layers). Data: each step a deterministic batch
// of batch_size rows, x[i, j] = cos(0.37 (i * 8 + j) + step) and target
// sum_j sin(x[i, j]) / 4; replica r takes rows [r B / R, (r + 1) B / R).
// Mse loss, Sgd(lr). World rank w is replica w / stages, stage w % stages.
// Rank 0 prints one line per step and a summary:
//
//   pipeline_demo: 2 stages x 2 replicas, 1f1b, 4 chunks, 4 layers
//   step 0 loss 0.1234567
//   ...
//
// (the loss: the mean of the last stage's micro-batch losses, averaged
// over replicas). GPipe and 1F1B print the same lines (bitwise equal
// gradients).
#ifndef TANDEM_TRAIN_EXAMPLES_PIPELINE_DEMO_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_PIPELINE_DEMO_LIB_H_

#include <cstdint>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/parallel/pipeline/pipeline.h"

namespace tandem::train {

struct PipelineDemoConfig {
  PipelineSchedule schedule = PipelineSchedule::k1F1B;  // --schedule
  int64_t chunks = 4;                                   // --chunks
  int64_t replicas = 1;                                 // --replicas
  int64_t steps = 20;                                   // --steps
  int64_t batch_size = 32;  // --batch_size, the global batch
  int64_t hidden = 32;      // --hidden
  int64_t layers = 4;       // --layers, Linear layers (>= stages)
  double lr = 0.05;         // --lr
  uint64_t seed = 0;        // --seed
};

// InvalidArgument naming the flag unless 1 <= chunks <= 1024,
// 1 <= replicas <= 1024, 0 <= steps <= 10^6, 1 <= batch_size <= 65536,
// 1 <= hidden <= 4096, 2 <= layers <= 256, 0 < lr <= 10 (finite).
absl::Status CheckPipelineDemoConfig(const PipelineDemoConfig& config);

// Runs the demo on `comm`'s rank (collective). Errors: a world size that
// is not a multiple of replicas, fewer layers than stages, a per-replica
// batch smaller than chunks (named), and whatever the pipeline or DDP
// report (ranks that disagree on the schedule or chunks included).
absl::Status RunPipelineDemo(comm::Communicator& comm,
                             const PipelineDemoConfig& config,
                             Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_PIPELINE_DEMO_LIB_H_
