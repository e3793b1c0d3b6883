// //bench/predict:predict_gpt2 — GPT-2 124M's step on 8, 64 and 512 GPUs,
// DDP and FSDP, from the step's collective schedule on the network cost
// model (bench/predict/gpt_schedule.h says what it rests on).
//
//   ./bazelw run -c opt //bench/predict:predict_gpt2
//   ./bazelw run -c opt //bench/predict:predict_gpt2 -- --gpus=8,64
//       --nics_per_node=1 --batch=4   (one command line)
//
// One row per GPU count and mode: predicted step, compute, exposed
// communication, all communication, efficiency (compute / step), tokens/s
// of the whole cluster. Exit codes: 0 success, 1 the cost model failed,
// 2 usage error.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/predict/gpt_schedule.h"
#include "sim/cost/collective_cost.h"
#include "sim/cost/topology.h"

ABSL_FLAG(std::string, preset, "h100-nvlink",
          "Node preset (sim/cost/topology.h): a100-nvlink, h100-nvlink, "
          "h100-nvls, pcie-gen4.");
ABSL_FLAG(std::string, gpus, "8,64,512",
          "GPU counts, multiples of 8 (8 GPUs per node), comma-separated.");
ABSL_FLAG(int, nics_per_node, 8, "InfiniBand NICs per node, 1..8.");
ABSL_FLAG(double, nic_gbps, 400, "Gb/s per NIC (400 = NDR, 200 = HDR).");
ABSL_FLAG(std::string, algorithm, "auto", "auto, ring, tree or nvls.");
ABSL_FLAG(int64_t, batch, 12, "Sequences per GPU per step.");
ABSL_FLAG(int64_t, block, 1024, "Tokens per sequence, 1..1024.");
ABSL_FLAG(double, tflops, 67,
          "Dense FP32 TFLOP/s of one GPU (H100 SXM datasheet: 67).");
ABSL_FLAG(int64_t, bucket_cap_mb, 25, "DDP bucket size, MiB.");

namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr, "predict_gpt2: %s\n", message.c_str());
  return tandem::kExitUsageError;
}

}  // namespace

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "predict_gpt2",
           .summary = "predicts GPT-2 124M's DDP and FSDP step on a GPU "
                      "cluster from its collective schedule on the network "
                      "cost model.",
           .flag_folders = {"bench/predict/"}},
          argc, argv)) {
    return *exit_code;
  }
  absl::StatusOr<tandem::sim::cost::Algorithm> algorithm =
      tandem::sim::cost::ParseAlgorithm(absl::GetFlag(FLAGS_algorithm));
  if (!algorithm.ok()) return Usage(std::string(algorithm.status().message()));
  std::vector<int> gpus;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_gpus), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(part, &n) || n < 8 || n % 8 != 0 || n > 65536) {
      return Usage(
          absl::StrCat("--gpus wants multiples of 8 up to 65536 "
                       "(8 GPUs per node), comma-separated; found '",
                       std::string(part), "'"));
    }
    gpus.push_back(n);
  }
  const double nic_gbps = absl::GetFlag(FLAGS_nic_gbps);
  const double tflops = absl::GetFlag(FLAGS_tflops);
  const int nics = absl::GetFlag(FLAGS_nics_per_node);
  if (!(nic_gbps >= 1 && nic_gbps <= 100000)) {
    return Usage(absl::StrCat("--nic_gbps=", nic_gbps,
                              ": expected a NIC speed in 1..100000 Gb/s"));
  }
  if (!(tflops >= 0.001 && tflops <= 1e6)) {
    return Usage(absl::StrCat("--tflops=", tflops,
                              ": expected a GPU's TFLOP/s in 0.001..1e6"));
  }
  if (nics < 1 || nics > 8) {
    return Usage(absl::StrCat("--nics_per_node=", nics, ": expected 1..8"));
  }
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t cap = absl::GetFlag(FLAGS_bucket_cap_mb);
  if (batch < 1 || batch > 65536 || cap < 1 || cap > 100000) {
    return Usage(absl::StrCat("--batch=", batch, " --bucket_cap_mb=", cap,
                              ": expected batch in 1..65536 and "
                              "bucket_cap_mb in 1..100000"));
  }
  tandem::bench::GptStepConfig config;
  config.batch = absl::GetFlag(FLAGS_batch);
  config.block = absl::GetFlag(FLAGS_block);
  config.tflops = absl::GetFlag(FLAGS_tflops);
  config.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  config.algorithm = *algorithm;
  std::printf(
      "predict_gpt2: GPT-2 124M, %lld x %lld tokens per GPU, f32 at %.0f "
      "TFLOP/s, %s, %d x %.0f Gb/s NICs per node\n",
      static_cast<long long>(config.batch),
      static_cast<long long>(config.block), config.tflops,
      absl::GetFlag(FLAGS_preset).c_str(), absl::GetFlag(FLAGS_nics_per_node),
      absl::GetFlag(FLAGS_nic_gbps));
  std::printf("%6s %5s %10s %11s %11s %9s %6s %12s\n", "gpus", "mode",
              "step_ms", "compute_ms", "exposed_ms", "comm_ms", "eff",
              "tokens/s");
  for (int n : gpus) {
    absl::StatusOr<tandem::sim::cost::Topology> topology =
        tandem::sim::cost::MakeTopology(absl::GetFlag(FLAGS_preset), n / 8,
                                        absl::GetFlag(FLAGS_nics_per_node),
                                        absl::GetFlag(FLAGS_nic_gbps));
    if (!topology.ok()) return Usage(std::string(topology.status().message()));
    for (bool fsdp : {false, true}) {
      config.fsdp = fsdp;
      absl::StatusOr<tandem::bench::GptStepPrediction> p =
          tandem::bench::PredictGpt2Step(*topology, config);
      if (!p.ok()) {
        std::fprintf(stderr, "predict_gpt2: %s\n",
                     p.status().ToString().c_str());
        return p.status().code() == absl::StatusCode::kInvalidArgument
                   ? tandem::kExitUsageError
                   : tandem::kExitRuntimeError;
      }
      const double tokens =
          static_cast<double>(n) * config.batch * config.block;
      std::printf("%6d %5s %10.2f %11.2f %11.2f %9.2f %6.3f %12.0f\n", n,
                  fsdp ? "fsdp" : "ddp", p->step_s * 1e3, p->compute_s * 1e3,
                  p->exposed_comm_s * 1e3, p->comm_s * 1e3,
                  p->compute_s / p->step_s, tokens / p->step_s);
    }
  }
  std::fflush(stdout);
  return tandem::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("predict_gpt2")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("predict_gpt2", Run(argc, argv));
}
