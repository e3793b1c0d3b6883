// //bench/predict:predict — how fast would this DDP step run on a cluster?
//
//   ./bazelw run -c opt //bench/predict:predict -- --nodes=1,2,4 --device=h100
//
// Runs the real DDP training step of an MLP at each world size on the
// simulated cluster with the network clock on, and prints one row per world
// size: predicted step time, its compute and exposed-communication parts,
// the modelled communication time and the scaling efficiency (compute / step
// time). See bench/predict/predict_lib.h for what is measured and what is
// modelled. Exit codes: 0 success, 1 the run failed, 2 usage error.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/predict/predict_lib.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/topology.h"

ABSL_FLAG(std::string, preset, "h100-nvlink",
          "The node: a100-nvlink, h100-nvlink, h100-nvls or pcie-gen4.");
ABSL_FLAG(std::string, nodes, "1",
          "Comma-separated node counts (8 GPUs each); one row per count.");
ABSL_FLAG(int, nics_per_node, 8, "InfiniBand NICs per node, 1..8.");
ABSL_FLAG(double, nic_gbps, 400,
          "Speed of one NIC, Gb/s, 1..100000 (200 HDR, 400 NDR).");
ABSL_FLAG(int, world_size, 0,
          "Ranks on one node when fewer than 8 (0: every GPU).");
ABSL_FLAG(std::string, algorithm, "auto",
          "Collective algorithm: auto (fastest), ring, tree or nvls.");
ABSL_FLAG(std::string, device, "host",
          "Compute speed: host (this CPU core as the device), a100 or h100 "
          "(host time inside matrix products scaled by measured host GFLOP/s "
          "over the GPU's FP32 peak, the rest by measured host memory "
          "bandwidth over the GPU's).");
ABSL_FLAG(double, compute_scale, -1,
          "Simulated compute seconds per host CPU second, for all compute "
          "(no memory term), at most 10000; overrides --device when >= 0.");
ABSL_FLAG(int64_t, input, 1024, "MLP input features.");
ABSL_FLAG(int64_t, hidden, 1024, "MLP hidden units.");
ABSL_FLAG(int64_t, layers, 2, "MLP hidden layers, 1..256.");
ABSL_FLAG(int64_t, classes, 10, "MLP output classes.");
ABSL_FLAG(int64_t, batch, 32, "Samples per rank per step.");
ABSL_FLAG(int64_t, warmup, 1, "Steps before measuring, 0..1000.");
ABSL_FLAG(int64_t, steps, 2, "Steps measured, 1..1000.");
ABSL_FLAG(int64_t, bucket_cap_mb, 25, "DDP bucket size, MiB.");
ABSL_FLAG(bool, overlap, true,
          "Launch bucket all-reduces during backward (DDP's overlap).");

namespace {

using tandem::bench::PredictConfig;

int Usage(const std::string& message) {
  std::fprintf(stderr, "predict: %s\n", message.c_str());
  return tandem::kExitUsageError;
}

}  // namespace

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  const tandem::CommandLine command_line = {
      .program = "predict",
      .summary =
          "predicts the DDP step time of an MLP on a GPU cluster "
          "(topology preset x nodes) from the simulated cluster's "
          "network clock.",
      .flag_folders = {"bench/predict/"}};
  if (std::optional<int> exit_code =
          tandem::HandleCommandLine(command_line, argc, argv)) {
    return *exit_code;
  }
  PredictConfig config;
  config.preset = absl::GetFlag(FLAGS_preset);
  config.nics_per_node = absl::GetFlag(FLAGS_nics_per_node);
  config.nic_gbps = absl::GetFlag(FLAGS_nic_gbps);
  config.world_size = absl::GetFlag(FLAGS_world_size);
  config.input = absl::GetFlag(FLAGS_input);
  config.hidden = absl::GetFlag(FLAGS_hidden);
  config.layers = absl::GetFlag(FLAGS_layers);
  config.classes = absl::GetFlag(FLAGS_classes);
  config.batch = absl::GetFlag(FLAGS_batch);
  config.warmup = absl::GetFlag(FLAGS_warmup);
  config.steps = absl::GetFlag(FLAGS_steps);
  config.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  config.overlap = absl::GetFlag(FLAGS_overlap);
  absl::StatusOr<tandem::sim::cost::Algorithm> algorithm =
      tandem::sim::cost::ParseAlgorithm(absl::GetFlag(FLAGS_algorithm));
  if (!algorithm.ok()) return Usage(std::string(algorithm.status().message()));
  config.algorithm = *algorithm;

  std::vector<int> node_counts;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_nodes), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 1) {
      return Usage(
          absl::StrCat("--nodes wants positive integers separated by "
                       "commas; found '",
                       absl::GetFlag(FLAGS_nodes), "'"));
    }
    node_counts.push_back(n);
  }
  // Outside these ranges the model answers nonsense (a 300-digit step time
  // at 100 % efficiency, or inf): no NIC is slower than 1 Gb/s or faster
  // than 100 Tb/s, and no device is 10^4 times slower than this core.
  constexpr double kMinNicGbps = 1;
  constexpr double kMaxNicGbps = 1e5;
  constexpr double kMaxComputeScale = 1e4;
  if (!(config.nic_gbps >= kMinNicGbps && config.nic_gbps <= kMaxNicGbps)) {
    return Usage(absl::StrCat("--nic_gbps=", config.nic_gbps,
                              ": expected a NIC speed in ", kMinNicGbps, "..",
                              kMaxNicGbps, " Gb/s (200 HDR, 400 NDR)"));
  }
  if (const double scale = absl::GetFlag(FLAGS_compute_scale);
      std::isnan(scale) || scale > kMaxComputeScale) {
    return Usage(absl::StrCat("--compute_scale=", scale,
                              ": expected simulated seconds per host "
                              "second in 0..",
                              kMaxComputeScale, " (or < 0: use --device)"));
  }
  // Every argument is checked before anything runs (exit 2, not 1).
  for (int n : node_counts) {
    PredictConfig c = config;
    c.nodes = n;
    c.compute_scale = 0;
    c.steps = 1;
    if (absl::Status s = tandem::sim::cost::MakeTopology(
                             c.preset, n, c.nics_per_node, c.nic_gbps)
                             .status();
        !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  const double forced_scale = absl::GetFlag(FLAGS_compute_scale);
  std::string profile_text;
  if (forced_scale >= 0) {
    config.compute_scale = forced_scale;
    profile_text = absl::StrFormat("compute scale %.3g", forced_scale);
  } else {
    absl::StatusOr<tandem::bench::DeviceProfile> profile =
        tandem::bench::DeviceProfileFor(absl::GetFlag(FLAGS_device));
    if (!profile.ok()) return Usage(std::string(profile.status().message()));
    config.compute_scale = profile->compute_scale;
    config.memory_scale = profile->memory_scale;
    profile_text =
        profile->memory_scale < 0
            ? std::string("compute scale 1")
            : absl::StrFormat(
                  "host %.0f GFLOP/s, %.1f GB/s: math scale %.3g, memory "
                  "scale %.3g",
                  profile->host_gflops, profile->host_gbps,
                  profile->compute_scale, profile->memory_scale);
  }

  std::printf(
      "predict: MLP %lld-%lldx%lld-%lld, batch %lld per rank, %s, algorithm "
      "%s, device %s (%s), overlap %s\n",
      static_cast<long long>(config.input),
      static_cast<long long>(config.hidden),
      static_cast<long long>(config.layers),
      static_cast<long long>(config.classes),
      static_cast<long long>(config.batch), config.preset.c_str(),
      tandem::sim::cost::AlgorithmName(config.algorithm).c_str(),
      absl::GetFlag(FLAGS_device).c_str(), profile_text.c_str(),
      config.overlap ? "on" : "off");
  std::fputs(tandem::bench::TableHeader().c_str(), stdout);
  for (int n : node_counts) {
    PredictConfig c = config;
    c.nodes = n;
    absl::StatusOr<tandem::bench::Prediction> p = tandem::bench::Predict(c);
    if (!p.ok()) {
      std::fprintf(stderr, "predict: %s\n", p.status().ToString().c_str());
      return p.status().code() == absl::StatusCode::kInvalidArgument
                 ? tandem::kExitUsageError
                 : tandem::kExitRuntimeError;
    }
    std::fputs(tandem::bench::FormatRow(*p).c_str(), stdout);
    std::fflush(stdout);
  }
  return tandem::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("predict")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("predict", Run(argc, argv));
}
