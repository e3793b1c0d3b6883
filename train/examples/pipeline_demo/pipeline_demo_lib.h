// The pipeline demo, as a function every rank runs (pipeline_demo_main.cc
// wraps it in a command line): an MLP regression split into consecutive
// stages, one per rank, run through Strategy::CreatePipeline
// (train/parallel/pipeline/pipeline.h), optionally replicated `replicas`
// times with DDP over each stage's replicas (2-D: world = stages x replicas,
// sub-communicators from Communicator::Split).
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
#ifndef TANDEM_TRAIN_EXAMPLES_PIPELINE_DEMO_PIPELINE_DEMO_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_PIPELINE_DEMO_PIPELINE_DEMO_LIB_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/examples/runner/example_options.h"

namespace tandem::train {

// The demo's options (example_options.h), its whole config: it writes no
// checkpoints and runs no training loop. Every rank must be given the same,
// but RunPipelineDemo checks the rules only; the pipeline compares the
// schedule and chunks across ranks itself, naming both values. --schedule:
// ParsePipelineSchedule.
#define TANDEM_PIPELINE_DEMO_OPTIONS(X)                                  \
  X(std::string, schedule, "1f1b", Any(), kAgreed,                       \
    "Pipeline schedule: gpipe or 1f1b.")                                 \
  X(int64_t, chunks, 4, Between(1, 1024), kAgreed,                       \
    "Micro-batches per replica's batch.")                                \
  X(int64_t, replicas, 1, Between(1, 1024), kAgreed,                     \
    "Data-parallel copies of the pipeline (DDP over each stage's "       \
    "replicas); the world size must be stages x replicas.")              \
  X(int64_t, steps, 20, Between(0, 1000000), kAgreed, "Training steps.") \
  X(int64_t, batch_size, 32, Between(1, 65536), kAgreed,                 \
    "Global batch rows per step.")                                       \
  X(int64_t, hidden, 32, Between(1, 4096), kAgreed,                      \
    "Width of the hidden layers.")                                       \
  X(int64_t, layers, 4, Between(2, 256), kAgreed,                        \
    "Linear layers, split over the stages.")                             \
  X(double, lr, 0.05, AboveAtMost(0, 10), kAgreed, "Sgd learning rate.") \
  X(uint64_t, seed, 0, Any(), kAgreed, "Seed of the initial weights.")
TANDEM_EXAMPLE_OPTIONS(PipelineDemoConfig, TANDEM_PIPELINE_DEMO_OPTIONS);

// Runs the demo on `comm`'s rank (collective). Errors, each named: a broken
// rule or an unknown schedule, a world size that is not a multiple of
// replicas, fewer layers than stages, a per-replica batch smaller than
// chunks; and the pipeline's or DDP's.
absl::Status RunPipelineDemo(comm::Communicator& comm,
                             const PipelineDemoConfig& config,
                             Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_PIPELINE_DEMO_PIPELINE_DEMO_LIB_H_
