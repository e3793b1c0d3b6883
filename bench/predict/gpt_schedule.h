// The predicted step of GPT-2 124M (tensor/nn/models/gpt.h) on a modelled
// cluster, DDP and FSDP, from the step's collective schedule on the network
// cost model (sim/cost) and its FLOPs on a device's peak.
//
// Why not the network clock's real run (predict_lib.h): that runs every
// rank's real step, and 124M parameters need 2 GiB per DDP rank (f32
// parameters, gradients and AdamW's moments), so 8 ranks already fill this
// host and 512 cannot run. Instead the schedule tandem's wrappers issue is
// replayed on the same cost model and stream rule (one stream per
// communicator; a collective starts when it is issued and the previous one
// is done; compute waits only where the wrapper waits):
//
//   compute  forward 2 x (matrix parameters) + 4 L T C FLOPs per token (QK^T
//            and AV, full T x T), backward twice that, at `tflops`; split
//            over the units in proportion to their FLOPs (the head's
//            V x C product is the root's; embeddings cost nothing).
//   DDP      gradients bucketed in reverse parameter order, bucket_cap_mb
//            per bucket (train/parallel/core/flat_buckets.h); a bucket's
//            all-reduce is issued when its last gradient is final: a block's
//            after its backward, ln_f's after the head's, the tied wte's
//            after the embedding's, at the end; the step waits for the last.
//   FSDP     one unit per block plus the root (wte, wpe, ln_f): forward
//            all-gathers the root (exposed), then each block's while the
//            previous one computes (prefetch); backward all-gathers each
//            block again while the next-later one computes, and
//            reduce-scatters each block once its backward is done; the
//            root's reduce-scatter comes last (exposed). Shards are padded
//            to a multiple of the world size.
//   Not counted: the optimizer step, data loading, kernel launch gaps.
//
// Pure function; thread-safe.
#ifndef TANDEM_BENCH_PREDICT_GPT_SCHEDULE_H_
#define TANDEM_BENCH_PREDICT_GPT_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/topology.h"

namespace tandem::bench {

struct GptStepConfig {
  int64_t batch = 12;    // sequences per rank (nanoGPT's train_gpt2.py)
  int64_t block = 1024;  // tokens per sequence
  // Dense FP32 throughput of one device: H100 SXM's datasheet 67 TFLOP/s
  // (the same roofline as predict_lib.h's device profile).
  double tflops = 67;
  int64_t bucket_cap_mb = 25;
  bool fsdp = false;
  sim::cost::Algorithm algorithm = sim::cost::Algorithm::kAuto;
};

struct GptStepPrediction {
  double step_s = 0;
  double compute_s = 0;
  double exposed_comm_s = 0;  // step_s - compute_s
  double comm_s = 0;          // every collective's modelled time, summed
  int64_t collectives = 0;
};

// InvalidArgument for a batch, block (<= 1024) or tflops out of range; the
// cost model's errors (an algorithm the topology lacks).
absl::StatusOr<GptStepPrediction> PredictGpt2Step(
    const sim::cost::Topology& topology, const GptStepConfig& config);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_PREDICT_GPT_SCHEDULE_H_
