// zero_benchmark: memory per rank, traffic per step and step time of the
// sharding modes (DDP, ZeRO-1, ZeRO-2, FSDP) on the large MLP, on the
// simulated cluster, against the ZeRO paper's formulas.
//
//   ./bazelw run -c opt //bench:zero_benchmark                  # 4 and 8 ranks
//   ./bazelw run -c opt //bench:zero_benchmark -- --world_sizes=4 --modes=fsdp
//
// Model: MLP 1024 -> 4096 -> 4096 -> 1024 (ReLU between; 25.2 M f32
// parameters, Psi), batch 64 per rank, loss mean(y^2), AdamW; or, with
// --model=gpt2, GPT-2 124M (gpt_ddp's --preset=gpt2) on --gpt_batch
// sequences of --gpt_block random tokens per rank, next-token loss, fsdp
// with one unit per block and the root unit (docs/sharding.md's table):
//   ./bazelw run -c opt //bench:zero_benchmark -- --model=gpt2
//       --world_sizes=4 --speed_world=0      (one command line) Each rank
// trains one warm-up step (AdamW creates its state), then the measured step.
//
// Memory comes from the allocator's statistics: every tensor allocation is
// attributed to the rank whose thread made it (bench/rank_memory.h).
//   state  bytes in use after the measured step: parameters, gradients,
//          optimizer state (and the batch, 0.3 MiB)
//   peak   the maximum bytes in use during the measured step
//   fwd    bytes in use after the measured step's forward and loss minus
//          before its forward: the activations (under fsdp also the
//          gathered root unit); --model=gpt2 prints their formula
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
#include <functional>
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
#include "base/std_streams.h"
#include "bench/rank_memory.h"
#include "comm/communicator.h"
#include "comm/traffic_counter.h"
#include "comm/types.h"
#include "sim/sim.h"
#include "tensor/allocator.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/models/gpt.h"
#include "tensor/ops.h"
#include "train/parallel/strategy.h"

ABSL_FLAG(std::string, model, "mlp",
          "mlp (the large MLP) or gpt2 (GPT-2 124M, --preset=gpt2 of "
          "gpt_ddp; fsdp wraps each block, the rest the root unit).");
ABSL_FLAG(int64_t, gpt_batch, 1, "--model=gpt2: sequences per rank.");
ABSL_FLAG(int64_t, gpt_block, 64, "--model=gpt2: tokens per sequence.");
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

// GPT-2 124M's sizes at b sequences of t tokens per rank, f32.
struct GptSizes {
  int64_t parameters = 0;  // Psi (the tied head counted once)
  int64_t root_unit = 0;   // fsdp's root: wte, wpe, ln_f
  double activation_bytes = 0;
  std::string activation_terms;
};

// The activations: what autograd keeps from forward to backward in
// tensor/nn/models/gpt.cc's graph, in f32 elements per layer (B T tokens,
// C wide, H heads): ln_1's input, output and mean/rstd (2 BTC + 2 BT);
// the q, k, v block attention saves (3 BTC, permuted from c_attn's output);
// the attention probabilities (B H T^2); the heads merged (BTC, c_proj's
// input); ln_2's input, output and statistics (2 BTC + 2 BT); c_fc's
// output (4 BTC, GELU's input) and GELU's output (4 BTC, c_proj's input):
// 16 BTC + 4 BT + B H T^2. Outside the layers: the embedding sum (BTC),
// ln_f's input, output and statistics (2 BTC + 2 BT), and what
// cross-entropy keeps of the logits (B T V; the logits tensor itself is
// freed once the loss is computed).
GptSizes Gpt2Sizes(int64_t b, int64_t t) {
  const nn::GptConfig c = nn::GptConfig::Gpt2();
  const int64_t C = c.n_embd, L = c.n_layer, V = c.vocab_size;
  GptSizes s;
  s.parameters = V * C + c.block_size * C +
                 L * (4 * C + 3 * C * C + 3 * C + C * C + C + 4 * C * C +
                      4 * C + 4 * C * C + C) +
                 2 * C;
  s.root_unit = V * C + c.block_size * C + 2 * C;
  const double btc = static_cast<double>(b * t * C);
  const double per_layer =
      16 * btc + 4.0 * b * t + static_cast<double>(b * c.n_head * t * t);
  const double outside = 3 * btc + 2.0 * b * t + 1.0 * b * t * V;
  s.activation_bytes = 4 * (L * per_layer + outside);
  s.activation_terms = absl::StrFormat(
      "4 B x (%d layers x (16 BTC + 4 BT + B H T^2) + 3 BTC + 2 BT + BTV)", L);
  return s;
}

// What a case trains: the model, how fsdp wraps it, and one step's loss.
struct Workload {
  std::unique_ptr<nn::Module> model;
  std::string fsdp_unit_layers;  // StrategyOptions::fsdp_unit_layers
  std::function<absl::StatusOr<Tensor>(train::Strategy&)> loss;
};

absl::StatusOr<Workload> MlpWorkload(int rank) {
  Workload w;
  TANDEM_ASSIGN_OR_RETURN(w.model, LargeMlp());
  Generator gen(99 + rank);
  std::vector<float> values(kBatch * kWidths.front());
  gen.Uniform(values.data(), static_cast<int64_t>(values.size()), -1.f, 1.f);
  TANDEM_ASSIGN_OR_RETURN(
      Tensor x, Tensor::FromVector(values, {kBatch, kWidths.front()}));
  w.loss = [x](train::Strategy& t) -> absl::StatusOr<Tensor> {
    TANDEM_ASSIGN_OR_RETURN(Tensor y, t.Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
    return Mean(sq);
  };
  return w;
}

// GPT-2 124M (the weights' generator outlives the model: dropout is 0, so
// it is never drawn from after Create); next-token loss on random ids.
absl::StatusOr<Workload> Gpt2Workload(int rank, Generator& init) {
  Workload w;
  TANDEM_ASSIGN_OR_RETURN(w.model,
                          nn::Gpt::Create(nn::GptConfig::Gpt2(), init));
  w.fsdp_unit_layers = "transformer.h";
  const int64_t b = absl::GetFlag(FLAGS_gpt_batch);
  const int64_t t = absl::GetFlag(FLAGS_gpt_block);
  const int64_t vocab = nn::GptConfig::Gpt2().vocab_size;
  Generator gen(99 + rank);
  std::vector<int64_t> ids(static_cast<size_t>(b * (t + 1)));
  for (int64_t& id : ids) {
    double u = 0;
    gen.Uniform(&u, 1, 0.0, 1.0);
    id = std::min<int64_t>(vocab - 1, static_cast<int64_t>(u * vocab));
  }
  std::vector<int64_t> xs, ys;
  for (int64_t i = 0; i < b; ++i) {
    xs.insert(xs.end(), ids.begin() + i * (t + 1),
              ids.begin() + i * (t + 1) + t);
    ys.insert(ys.end(), ids.begin() + i * (t + 1) + 1,
              ids.begin() + (i + 1) * (t + 1));
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector(xs, {b, t}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(ys, {b, t}));
  w.loss = [x, y](train::Strategy& s) -> absl::StatusOr<Tensor> {
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, s.Forward(x));
    return nn::Gpt::Loss(logits, y);
  };
  return w;
}

struct CaseResult {
  int64_t state_bytes = 0;  // max over ranks
  int64_t peak_bytes = 0;   // max over ranks
  // Bytes in use after the measured step's forward and loss minus before
  // its forward (max over ranks): the activations autograd keeps (under
  // fsdp also the units still gathered: the root).
  int64_t forward_bytes = 0;
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
        Generator init(1234);
        TANDEM_ASSIGN_OR_RETURN(Workload work,
                                absl::GetFlag(FLAGS_model) == "gpt2"
                                    ? Gpt2Workload(rank, init)
                                    : MlpWorkload(rank));
        TANDEM_ASSIGN_OR_RETURN(
            auto trainer,
            train::Strategy::Create(
                mode, *work.model, comm,
                train::AdamWFactory({.lr = 1e-4, .weight_decay = 0.1}),
                {.fsdp_unit_layers = work.fsdp_unit_layers}));
        int64_t forward_bytes = 0;
        auto step = [&]() -> absl::Status {
          trainer->ZeroGrad();
          const int64_t before = memory.Stats(rank).bytes_in_use;
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, work.loss(*trainer));
          forward_bytes = memory.Stats(rank).bytes_in_use - before;
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
        per_rank[rank].forward_bytes = forward_bytes;
        return inner.Barrier();
      });
  TANDEM_RETURN_IF_ERROR(run.status());
  CaseResult out;
  out.traffic_bytes = per_rank[0].traffic_bytes;
  for (const CaseResult& r : per_rank) {
    out.state_bytes = std::max(out.state_bytes, r.state_bytes);
    out.peak_bytes = std::max(out.peak_bytes, r.peak_bytes);
    out.forward_bytes = std::max(out.forward_bytes, r.forward_bytes);
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

  const bool gpt = absl::GetFlag(FLAGS_model) == "gpt2";
  if (!gpt && absl::GetFlag(FLAGS_model) != "mlp") {
    std::fprintf(stderr, "zero_benchmark: --model=%s; expected mlp or gpt2\n",
                 absl::GetFlag(FLAGS_model).c_str());
    return kExitUsageError;
  }
  const int64_t gpt_b = absl::GetFlag(FLAGS_gpt_batch);
  const int64_t gpt_t = absl::GetFlag(FLAGS_gpt_block);
  if (gpt_b < 1 || gpt_b > 64 || gpt_t < 1 ||
      gpt_t > nn::GptConfig::Gpt2().block_size) {
    std::fprintf(stderr,
                 "zero_benchmark: --gpt_batch must be in [1, 64] and "
                 "--gpt_block in [1, 1024]\n");
    return kExitUsageError;
  }
  int64_t psi = 0;
  int64_t largest_unit = 0;
  double activations = 0;  // formula, bytes per rank
  if (gpt) {
    const GptSizes g = Gpt2Sizes(gpt_b, gpt_t);
    psi = g.parameters;
    largest_unit = g.root_unit;
    activations = g.activation_bytes;
    std::printf(
        "zero_benchmark: GPT-2 124M (--preset=gpt2), Psi = %lld parameters, "
        "batch %lld x %lld tokens per rank, AdamW (nanoGPT's groups), sim; "
        "fsdp: one unit per block, the root unit %lld parameters\n"
        "activations formula: %.1f MiB per rank (%s)\n\n",
        static_cast<long long>(psi), static_cast<long long>(gpt_b),
        static_cast<long long>(gpt_t), static_cast<long long>(largest_unit),
        activations / (1 << 20), g.activation_terms.c_str());
  } else {
    for (size_t i = 0; i + 1 < kWidths.size(); ++i) {
      const int64_t unit = kWidths[i] * kWidths[i + 1] + kWidths[i + 1];
      psi += unit;
      largest_unit = std::max(largest_unit, unit);
    }
    std::printf(
        "zero_benchmark: MLP 1024-4096-4096-1024, Psi = %lld parameters, "
        "batch %lld per rank, AdamW, sim\n\n",
        static_cast<long long>(psi), static_cast<long long>(kBatch));
  }
  std::printf("%-6s %5s %11s %11s %7s %10s %10s %13s %9s %9s\n", "mode",
              "ranks", "state MiB", "formula MiB", "ratio", "peak MiB",
              "bound MiB", "traffic MiB", "x ddp", "fwd MiB");
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
          "%-6s %5d %11.1f %11.1f %7.3f %10.1f %10s %13.1f %9.2f %9.1f\n",
          ModeName(mode).c_str(), world, MiB(r->state_bytes),
          formula / (1 << 20), r->state_bytes / formula, MiB(r->peak_bytes),
          bound > 0 ? absl::StrFormat("%.1f", bound / (1 << 20)).c_str() : "-",
          MiB(r->traffic_bytes), traffic_ratio, MiB(r->forward_bytes));
      std::printf(
          "RESULT mode=%s world=%d state_bytes=%lld formula_bytes=%.0f "
          "peak_bytes=%lld peak_bound_bytes=%.0f traffic_bytes=%lld "
          "forward_bytes=%lld activation_formula_bytes=%.0f\n",
          ModeName(mode).c_str(), world, static_cast<long long>(r->state_bytes),
          formula, static_cast<long long>(r->peak_bytes), bound,
          static_cast<long long>(r->traffic_bytes),
          static_cast<long long>(r->forward_bytes), activations);
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

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
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

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("zero_benchmark")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("zero_benchmark", Run(argc, argv));
}
