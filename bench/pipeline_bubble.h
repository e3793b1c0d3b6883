// The pipeline bubble, measured on the simulated cluster's network clock
// (sim/clock.h): a rank pipeline (train/parallel/pipeline/pipeline.h) whose
// stages charge a fixed simulated time per micro-batch forward and backward, on
// a network with no latency, so the only idle time is the schedule's bubble.
//
//   bench::BubbleCase c{.stages = 4, .micro_batches = 8};
//   absl::StatusOr<bench::BubbleResult> r = bench::MeasureBubble(c);
//   // r->bubble == r->predicted == (4 - 1) / (8 + 4 - 1)
//
// What is measured: each stage is one real Linear (its host compute is not
// charged: compute_scale 0) followed by an identity op that charges
// forward_s to the rank's clock in forward and backward_s in backward
// (sim::AdvanceClock). The step time is the slowest rank's clock at the end
// of the step; every stage computes m * (forward_s + backward_s) of it, and
// the bubble is the rest: 1 - m (t_f + t_b) / step time. The textbook
// (GPipe paper; the same for 1F1B, which changes memory, not the bubble)
// says (p - 1) / (m + p - 1). The schedule's own per-step agreement (one
// small all-gather) costs nothing on this network.
//
// MeasureThroughput runs real compute instead: an MLP stage per rank whose
// thread CPU time is charged (compute_scale 1), so smaller micro-batches'
// lower efficiency shows.
// Blocks; runs `stages` threads.
#ifndef TANDEM_BENCH_PIPELINE_BUBBLE_H_
#define TANDEM_BENCH_PIPELINE_BUBBLE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "train/parallel/pipeline/pipeline.h"

namespace tandem::bench {

struct BubbleCase {
  int stages = 2;
  int64_t micro_batches = 1;
  train::PipelineSchedule schedule = train::PipelineSchedule::kGPipe;
  double forward_s = 1;   // simulated seconds per micro-batch forward
  double backward_s = 2;  // ... and backward (about twice, as for a GEMM)
};

struct BubbleResult {
  double step_s = 0;     // the slowest rank's simulated step time
  double compute_s = 0;  // m * (forward_s + backward_s)
  double bubble = 0;     // 1 - compute_s / step_s
  double predicted = 0;  // (p - 1) / (m + p - 1)
};

absl::StatusOr<BubbleResult> MeasureBubble(const BubbleCase& c);

struct ThroughputCase {
  int stages = 2;
  int64_t micro_batches = 1;
  train::PipelineSchedule schedule = train::PipelineSchedule::k1F1B;
  int64_t batch = 128;
  int64_t width = 512;  // each stage: Linear(width, width), ReLU
  int64_t layers_per_stage = 2;
  int64_t steps = 2;  // timed steps after one warm-up step
};

struct ThroughputResult {
  double step_s = 0;             // slowest rank's simulated step time
  double samples_per_s = 0;      // batch / step_s
  double busiest_compute_s = 0;  // the most compute one stage charged
  double bubble = 0;             // 1 - busiest_compute_s / step_s
  double predicted = 0;          // (p - 1) / (m + p - 1)
};

absl::StatusOr<ThroughputResult> MeasureThroughput(const ThroughputCase& c);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_PIPELINE_BUBBLE_H_
