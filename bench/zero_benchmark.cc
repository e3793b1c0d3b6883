// zero_benchmark: memory per rank, traffic per step and step time of the
// sharding modes (DDP, ZeRO-1, ZeRO-2, FSDP) on the large MLP, on the
// simulated cluster, against the ZeRO paper's formulas.
//
//   ./bazelw run -c opt //bench:zero_benchmark                  # 4 and 8 ranks
//   ./bazelw run -c opt //bench:zero_benchmark -- --world_sizes=4 --modes=fsdp
//
// Model: MLP 1024 -> 4096 -> 4096 -> 1024 (ReLU between; 25.2 M f32
// parameters, Psi), batch 64 per rank, loss mean(y^2), AdamW. Each rank
// trains one warm-up step (AdamW creates its state), then the measured step.
//
// Memory comes from the allocator's statistics: every tensor allocation is
// attributed to the rank whose thread made it (bench/rank_memory.h).
//   state  bytes in use after the measured step: parameters, gradients,
//          optimizer state (and the batch, 0.3 MiB)
//   peak   the maximum bytes in use during the measured step
// Formulas for f32 AdamW (4 B parameter + 4 B gradient + 8 B moments = 16 B
// per parameter; the paper's 16 B are mixed precision's 2 + 2 + 12):
//   ddp 16 Psi; zero1 (8 + 8/N) Psi; zero2 (4 + 12/N) Psi; fsdp 16 Psi / N.
// FSDP peak bound: 1.5 x (16 Psi / N + the largest unit's full parameters
// and gradients, 8 B x its elements).
//
// Traffic: the bytes of every collective buffer this rank issued in the
// measured step, counting an all-reduce twice (its reduce-scatter and
// all-gather halves, as the ZeRO paper does): DDP moves 2 Psi elements per
// step, FSDP 3 Psi (1.5 x).
//
// Output: a table, and one `RESULT key=value ...` line per case.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "bench/rank_memory.h"
#include "comm/communicator.h"
#include "comm/traffic_counter.h"
#include "comm/types.h"
#include "sim/sim.h"
#include "tensor/allocator.h"
#include "tensor/generator.h"
#include "tensor/nn/activation.h"
#include "tensor/nn/linear.h"
#include "tensor/nn/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/adamw.h"
#include "train/parallel/strategy.h"

ABSL_FLAG(std::string, world_sizes, "4,8",
          "Comma-separated world sizes of the memory and traffic table.");
ABSL_FLAG(std::string, modes, "ddp,zero1,zero2,fsdp",
          "Comma-separated modes: ddp, zero1, zero2, fsdp.");
ABSL_FLAG(int64_t, speed_world, 2,
          "World size of the step-time comparison (0: skip it).");
ABSL_FLAG(int64_t, speed_steps, 4, "Timed steps per mode in the comparison.");

namespace tandem {
namespace {

using train::ShardMode;

constexpr int64_t kBatch = 64;
const std::vector<int64_t> kWidths = {1024, 4096, 4096, 1024};

absl::StatusOr<std::unique_ptr<nn::Sequential>> LargeMlp() {
  Generator gen(1234);
  auto model = std::make_unique<nn::Sequential>();
  for (size_t i = 0; i + 1 < kWidths.size(); ++i) {
    if (i > 0) {
      TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
    }
    TANDEM_RETURN_IF_ERROR(
        model->Append(nn::Linear::Create(kWidths[i], kWidths[i + 1], gen)));
  }
  return model;
}

struct CaseResult {
  int64_t state_bytes = 0;    // max over ranks
  int64_t peak_bytes = 0;     // max over ranks
  int64_t traffic_bytes = 0;  // per step, rank 0
  double step_seconds = 0;    // slowest rank, per step
};

absl::StatusOr<CaseResult> RunCase(bench::RankMemory& memory, ShardMode mode,
                                   int world, int64_t steps) {
  std::vector<CaseResult> per_rank(world);
  sim::RunResult run =
      sim::Run(world, [&](int rank, comm::Communicator& inner) -> absl::Status {
        bench::RankMemory::ScopedRank scope(rank);
        comm::TrafficCounter comm(inner);
        TANDEM_ASSIGN_OR_RETURN(auto model, LargeMlp());
        TANDEM_ASSIGN_OR_RETURN(
            auto trainer,
            train::Strategy::Create(
                mode, *model, comm,
                [](std::vector<Tensor> params)
                    -> absl::StatusOr<std::unique_ptr<optim::Optimizer>> {
                  TANDEM_ASSIGN_OR_RETURN(
                      optim::AdamW adam,
                      optim::AdamW::Create(std::move(params), {.lr = 1e-4}));
                  return std::make_unique<optim::AdamW>(std::move(adam));
                }));
        Generator gen(99 + rank);
        std::vector<float> values(kBatch * kWidths.front());
        gen.Uniform(values.data(), static_cast<int64_t>(values.size()), -1.f,
                    1.f);
        TANDEM_ASSIGN_OR_RETURN(
            Tensor x, Tensor::FromVector(values, {kBatch, kWidths.front()}));
        auto step = [&]() -> absl::Status {
          trainer->ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor y, trainer->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mean(sq));
          TANDEM_RETURN_IF_ERROR(trainer->Backward(loss));
          return trainer->Step();
        };
        TANDEM_RETURN_IF_ERROR(step());  // warm-up: AdamW makes its state
        TANDEM_RETURN_IF_ERROR(inner.Barrier());
        memory.ResetPeak(rank);
        comm.bytes = 0;
        const absl::Time start = absl::Now();
        for (int64_t s = 0; s < steps; ++s) TANDEM_RETURN_IF_ERROR(step());
        per_rank[rank].step_seconds =
            absl::ToDoubleSeconds(absl::Now() - start) / steps;
        per_rank[rank].traffic_bytes = comm.bytes / steps;
        const bench::RankMemoryStats stats = memory.Stats(rank);
        per_rank[rank].state_bytes = stats.bytes_in_use;
        per_rank[rank].peak_bytes = stats.peak_bytes;
        return inner.Barrier();
      });
  TANDEM_RETURN_IF_ERROR(run.status());
  CaseResult out;
  out.traffic_bytes = per_rank[0].traffic_bytes;
  for (const CaseResult& r : per_rank) {
    out.state_bytes = std::max(out.state_bytes, r.state_bytes);
    out.peak_bytes = std::max(out.peak_bytes, r.peak_bytes);
    out.step_seconds = std::max(out.step_seconds, r.step_seconds);
  }
  return out;
}

// Bytes per parameter of `mode`'s persistent state at world size n.
double FormulaBytesPerParameter(ShardMode mode, int n) {
  switch (mode) {
    case ShardMode::kNone:
    case ShardMode::kLocal:     // not offered by --modes; no sharding
    case ShardMode::kPipeline:  // not offered by --modes; a stage's own state
      return 16;
    case ShardMode::kZero1:
      return 8 + 8.0 / n;
    case ShardMode::kZero2:
      return 4 + 12.0 / n;
    case ShardMode::kFsdp:
      return 16.0 / n;
  }
  return 0;
}

absl::StatusOr<std::vector<ShardMode>> ParseModes(const std::string& text) {
  std::vector<ShardMode> modes;
  for (absl::string_view m : absl::StrSplit(text, ',')) {
    if (m == "ddp") {
      modes.push_back(ShardMode::kNone);
      continue;
    }
    TANDEM_ASSIGN_OR_RETURN(ShardMode mode,
                            train::ParseShardMode(std::string(m)));
    modes.push_back(mode);
  }
  return modes;
}

std::string ModeName(ShardMode m) {
  return m == ShardMode::kNone ? "ddp" : train::ShardModeName(m);
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

int Main() {
  absl::StatusOr<std::vector<ShardMode>> modes =
      ParseModes(absl::GetFlag(FLAGS_modes));
  if (!modes.ok()) {
    std::fprintf(stderr, "zero_benchmark: %s\n",
                 std::string(modes.status().message()).c_str());
    return kExitUsageError;
  }
  std::vector<int> worlds;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_world_sizes),
                                            ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1 || n > 64) {
      std::fprintf(stderr,
                   "zero_benchmark: --world_sizes wants integers in [1, 64], "
                   "got \"%s\"\n",
                   std::string(w).c_str());
      return kExitUsageError;
    }
    worlds.push_back(n);
  }
  const int64_t speed_world = absl::GetFlag(FLAGS_speed_world);
  const int64_t speed_steps = absl::GetFlag(FLAGS_speed_steps);
  if (speed_world < 0 || speed_world > 64 || speed_steps < 1 ||
      speed_steps > 1000) {
    std::fprintf(stderr,
                 "zero_benchmark: --speed_world must be in [0, 64] and "
                 "--speed_steps in [1, 1000]\n");
    return kExitUsageError;
  }
  int max_world = static_cast<int>(speed_world);
  for (int w : worlds) max_world = std::max(max_world, w);
  auto memory = std::make_shared<bench::RankMemory>(max_world);
  if (!RegisterAllocator(DeviceType::kCPU, memory).ok()) return 1;

  int64_t psi = 0;
  int64_t largest_unit = 0;
  for (size_t i = 0; i + 1 < kWidths.size(); ++i) {
    const int64_t unit = kWidths[i] * kWidths[i + 1] + kWidths[i + 1];
    psi += unit;
    largest_unit = std::max(largest_unit, unit);
  }
  std::printf(
      "zero_benchmark: MLP 1024-4096-4096-1024, Psi = %lld parameters, "
      "batch %lld per rank, AdamW, sim\n\n",
      static_cast<long long>(psi), static_cast<long long>(kBatch));
  std::printf("%-6s %5s %11s %11s %7s %10s %10s %13s %9s\n", "mode", "ranks",
              "state MiB", "formula MiB", "ratio", "peak MiB", "bound MiB",
              "traffic MiB", "x ddp");
  for (int world : worlds) {
    int64_t ddp_traffic = 0;
    for (ShardMode mode : *modes) {
      absl::StatusOr<CaseResult> r = RunCase(*memory, mode, world, 1);
      if (!r.ok()) {
        std::fprintf(stderr, "zero_benchmark: %s at %d ranks: %s\n",
                     ModeName(mode).c_str(), world,
                     std::string(r.status().message()).c_str());
        return 1;
      }
      const double formula = FormulaBytesPerParameter(mode, world) * psi;
      const double bound = mode == ShardMode::kFsdp
                               ? 1.5 * (16.0 * psi / world + 8.0 * largest_unit)
                               : 0;
      if (mode == ShardMode::kNone) ddp_traffic = r->traffic_bytes;
      const double traffic_ratio =
          ddp_traffic > 0 ? static_cast<double>(r->traffic_bytes) / ddp_traffic
                          : 0;
      std::printf(
          "%-6s %5d %11.1f %11.1f %7.3f %10.1f %10s %13.1f %9.2f\n",
          ModeName(mode).c_str(), world, MiB(r->state_bytes),
          formula / (1 << 20), r->state_bytes / formula, MiB(r->peak_bytes),
          bound > 0 ? absl::StrFormat("%.1f", bound / (1 << 20)).c_str() : "-",
          MiB(r->traffic_bytes), traffic_ratio);
      std::printf(
          "RESULT mode=%s world=%d state_bytes=%lld formula_bytes=%.0f "
          "peak_bytes=%lld peak_bound_bytes=%.0f traffic_bytes=%lld\n",
          ModeName(mode).c_str(), world, static_cast<long long>(r->state_bytes),
          formula, static_cast<long long>(r->peak_bytes), bound,
          static_cast<long long>(r->traffic_bytes));
      std::fflush(stdout);
    }
  }
  if (speed_world > 0) {
    std::printf("\nstep time at %lld ranks (%lld steps, slowest rank):\n",
                static_cast<long long>(speed_world),
                static_cast<long long>(speed_steps));
    double ddp_seconds = 0;
    for (ShardMode mode : *modes) {
      absl::StatusOr<CaseResult> r =
          RunCase(*memory, mode, static_cast<int>(speed_world), speed_steps);
      if (!r.ok()) {
        std::fprintf(stderr, "zero_benchmark: %s\n",
                     std::string(r.status().message()).c_str());
        return 1;
      }
      if (mode == ShardMode::kNone) ddp_seconds = r->step_seconds;
      std::printf("%-6s step %8.1f ms  x ddp %5.2f\n", ModeName(mode).c_str(),
                  r->step_seconds * 1e3,
                  ddp_seconds > 0 ? r->step_seconds / ddp_seconds : 0.0);
      std::printf("RESULT speed mode=%s world=%lld step_ms=%.2f\n",
                  ModeName(mode).c_str(), static_cast<long long>(speed_world),
                  r->step_seconds * 1e3);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "zero_benchmark",
           .summary = "Measures memory per rank (allocator statistics), "
                      "traffic per step and step time of DDP, ZeRO-1, "
                      "ZeRO-2 and FSDP on the large MLP against the ZeRO "
                      "formulas.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  return tandem::Main();
}
