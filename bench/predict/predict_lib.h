// The predictor: runs the real DDP training step of an MLP on the simulated
// cluster with the network clock on (sim/clock.h) and reports the predicted
// step time on a chosen machine, split into compute and exposed
// communication, and the scaling efficiency.
//
//   bench::PredictConfig config;
//   config.preset = "h100-nvlink";
//   config.nodes = 4;                     // 32 ranks
//   absl::StatusOr<bench::Prediction> p = bench::Predict(config);
//   // p->step_s, p->compute_s, p->exposed_comm_s, p->efficiency()
//
// What is measured and what is modelled:
//   * compute: each rank's forward, backward, DDP bucket copies and optimizer
//     step run for real on this host; their thread CPU time, times
//     compute_scale, is the rank's compute (compute_scale 1: a device as fast
//     as one core of this host). A device profile (DeviceProfileFor) splits
//     it: the time inside matrix products scales by host GFLOP/s over the
//     GPU's FP32 peak, the rest (elementwise ops, the optimizer, bucket
//     copies: memory-bound) by host memory bandwidth over the GPU's.
//   * communication: DDP's bucket all-reduces, issued from the gradient
//     hooks during backward exactly as in training, take the cost model's
//     time (sim/cost) on the topology; what backward hides is not charged.
//   * step time: the slowest rank's clock over `steps` steps after `warmup`
//     steps, divided by steps; its compute and exposed communication add up
//     to it. Efficiency = compute / step time: the fraction of the step a
//     perfectly scaling cluster (no exposed communication) would take.
// Blocks; runs world_size threads.
#ifndef TANDEM_BENCH_PREDICT_PREDICT_LIB_H_
#define TANDEM_BENCH_PREDICT_PREDICT_LIB_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/cost/collective_cost.h"

namespace tandem::bench {

struct PredictConfig {
  // The machine (sim/cost/topology.h).
  std::string preset = "h100-nvlink";
  int nodes = 1;
  int nics_per_node = 8;
  double nic_gbps = 400;
  // Ranks; 0: every GPU of the topology (nodes x 8). Fewer than 8 uses one
  // node with that many GPUs.
  int world_size = 0;
  sim::cost::Algorithm algorithm = sim::cost::Algorithm::kAuto;
  // Simulated compute seconds per host CPU second (see above).
  double compute_scale = 1;
  // With a device profile's memory term (>= 0): compute_scale applies to
  // the matrix-product time only, memory_scale to the rest of the compute
  // (sim::ClockOptions::memory_scale). Negative: compute_scale for all.
  double memory_scale = -1;
  // The model: MLP input -> hidden (x layers, ReLU between) -> classes.
  int64_t input = 1024;
  int64_t hidden = 1024;
  int64_t layers = 2;
  int64_t classes = 10;
  int64_t batch = 32;  // per rank
  int64_t warmup = 1;
  int64_t steps = 2;
  int64_t bucket_cap_mb = 25;
  bool overlap = true;
};

struct Prediction {
  std::string topology;  // cost::Describe
  int world_size = 0;
  int64_t parameters = 0;
  double step_s = 0;          // predicted time of one step
  double compute_s = 0;       // of which compute (the slowest rank's)
  double exposed_comm_s = 0;  // and communication not hidden by compute
  double comm_s = 0;          // modelled communication time per step
  // compute / (compute + exposed communication), the step's busy fraction:
  // in [0, 1] exactly, by IEEE arithmetic (x / (x + y) <= 1 for y >= 0),
  // unlike compute_s / step_s, whose parts the clock sums separately and
  // which rounded to just above 1 when the compute of a loaded machine hid
  // all communication. 1 for an empty step.
  double efficiency() const {
    const double busy = compute_s + exposed_comm_s;
    return busy > 0 ? compute_s / busy : 1;
  }
};

absl::StatusOr<Prediction> Predict(const PredictConfig& config);

// How much faster than one core of this host a device computes.
struct DeviceProfile {
  double compute_scale = 1;  // host GFLOP/s / device FP32 GFLOP/s
  double memory_scale = -1;  // host GB/s / device GB/s; -1: no memory term
  double host_gflops = 0;    // measured (0 for "host")
  double host_gbps = 0;      // measured (0 for "host")
};

// The profile of `device`: "host" (1, no memory term), "a100" (A100 SXM
// 80GB: 19.5 TFLOP/s FP32, 2039 GB/s HBM2e) or "h100" (H100 SXM: 67 TFLOP/s
// FP32, 3350 GB/s HBM3), NVIDIA's datasheet figures. The host's rates are
// measured now on this thread: a 512^3 matrix product and a 64 MiB copy
// (bytes read + written), a few tens of milliseconds.
absl::StatusOr<DeviceProfile> DeviceProfileFor(absl::string_view device);

// One table row: "world  step_ms  compute_ms  exposed_ms  comm_ms  eff".
std::string FormatRow(const Prediction& p);
std::string TableHeader();

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_PREDICT_PREDICT_LIB_H_
