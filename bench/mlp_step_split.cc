// Where an MLP training step's time goes: one rank's local step (no DDP)
// of ddp_benchmark's MLP (default: the large one, 1024-4096-4096-1024,
// batch 64, ReLU between layers, cross-entropy, SGD), phase by phase
// (forward + loss, zero_grad, backward, SGD step), each split into the CPU
// time inside GEMMs (base/math_tally.h: every cpu::Gemm call) and the rest.
// Thread CPU time, so other load on the machine (a shared 2-core box) slows
// a phase's share less than wall time would; each figure is the least of
// --steps timed steps (load only ever adds).
//
//   bazel-bin/bench/mlp_step_split --steps=10
//   bazel-bin/bench/mlp_step_split --widths=384,1536,384 --batch=2048
//
// Exit 2 on a usage error (base/command_line.h), 1 when a step fails.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/math_tally.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "tensor/cpu/blas.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

ABSL_FLAG(std::string, widths, "1024,4096,4096,1024",
          "Layer widths, input first (ddp_benchmark's large MLP).");
ABSL_FLAG(int64_t, batch, 64, "Rows per step (one rank's batch).");
ABSL_FLAG(int64_t, steps, 10,
          "Timed steps (after 2 untimed); each phase's least time counts.");
ABSL_FLAG(std::string, kernels, "fastest",
          "cpu::KernelChoice: fastest (tandem's default) or pytorch.");
ABSL_FLAG(std::string, zero_grad, "mark",
          "How gradients are reset before each backward: mark "
          "(Module::MarkGradsZero, what train::Strategy and ddp_benchmark "
          "do) or fill (Module::ZeroGrad).");

namespace tandem::bench {
namespace {

enum Phase { kForward, kZeroGrad, kBackward, kSgd, kPhases };
const char* const kPhaseNames[kPhases] = {"forward+loss", "zero_grad",
                                          "backward", "sgd step"};

struct Times {
  double cpu[kPhases];   // thread CPU seconds of the phase
  double gemm[kPhases];  // of which inside GEMMs
};

absl::StatusOr<std::vector<int64_t>> ParseWidths(const std::string& text) {
  std::vector<int64_t> widths;
  for (const absl::string_view piece : absl::StrSplit(text, ',')) {
    int64_t w = 0;
    if (!absl::SimpleAtoi(piece, &w) || w < 1 || w > 65536) {
      return absl::InvalidArgumentError(
          "--widths: expected comma-separated widths in [1, 65536], got '" +
          text + "'");
    }
    widths.push_back(w);
  }
  if (widths.size() < 2) {
    return absl::InvalidArgumentError(
        "--widths: expected at least two widths (input and output), got '" +
        text + "'");
  }
  return widths;
}

absl::Status Run(const std::vector<int64_t>& widths, int64_t batch,
                 int64_t steps, bool mark_zero) {
  Generator gen(1234);
  nn::Sequential model;
  double flops = 0;  // GEMM FLOPs per step: as ddp_benchmark counts them
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0)
      TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<nn::ReLU>()));
    TANDEM_RETURN_IF_ERROR(
        model.Append(nn::Linear::Create(widths[i], widths[i + 1], gen)));
    const double product = 2.0 * batch * widths[i] * widths[i + 1];
    flops += product * (i == 0 ? 2 : 3);  // forward, dW, and dX but first
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Empty({batch, widths.front()}));
  gen.Normal(x.data<float>(), x.numel(), 0.f, 1.f);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t& l : labels) l = gen.Random() % widths.back();
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(model.Parameters(), 0.01));

  base::MathTallyScope tally;
  Times best;
  std::fill(best.cpu, best.cpu + kPhases, 1e30);
  std::fill(best.gemm, best.gemm + kPhases, 0.0);
  double best_step = 1e30, best_step_gemm = 0;
  for (int64_t s = 0; s < steps + 2; ++s) {
    Times t;
    double cpu0 = base::ThreadCpuSeconds(),
           gemm0 = base::ThisThreadMathSeconds();
    auto mark = [&](Phase p) {
      const double cpu1 = base::ThreadCpuSeconds();
      const double gemm1 = base::ThisThreadMathSeconds();
      t.cpu[p] = cpu1 - cpu0;
      t.gemm[p] = gemm1 - gemm0;
      cpu0 = cpu1, gemm0 = gemm1;
    };
    Tensor loss;
    {
      TANDEM_ASSIGN_OR_RETURN(Tensor logits, model.Forward(x));
      TANDEM_ASSIGN_OR_RETURN(loss, CrossEntropy(logits, y));
    }
    mark(kForward);
    if (mark_zero) {
      model.MarkGradsZero();
    } else {
      model.ZeroGrad();
    }
    mark(kZeroGrad);
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    mark(kBackward);
    TANDEM_RETURN_IF_ERROR(sgd.Step());
    mark(kSgd);
    if (s < 2) continue;  // warm-up: first-touch page faults, packing buffers
    double step = 0, step_gemm = 0;
    for (int p = 0; p < kPhases; ++p) {
      if (t.cpu[p] < best.cpu[p])
        best.cpu[p] = t.cpu[p], best.gemm[p] = t.gemm[p];
      step += t.cpu[p];
      step_gemm += t.gemm[p];
    }
    if (step < best_step) best_step = step, best_step_gemm = step_gemm;
  }
  std::printf(
      "# MLP %s, batch %lld, %.3f GEMM GFLOP per step, kernels=%s, "
      "zero_grad=%s\n",
      absl::GetFlag(FLAGS_widths).c_str(), static_cast<long long>(batch),
      flops / 1e9, absl::GetFlag(FLAGS_kernels).c_str(),
      absl::GetFlag(FLAGS_zero_grad).c_str());
  std::printf("%-14s %10s %10s %10s\n", "phase (best)", "cpu ms", "gemm ms",
              "other ms");
  for (int p = 0; p < kPhases; ++p) {
    std::printf("%-14s %10.2f %10.2f %10.2f\n", kPhaseNames[p],
                1e3 * best.cpu[p], 1e3 * best.gemm[p],
                1e3 * (best.cpu[p] - best.gemm[p]));
  }
  std::printf(
      "best step: %.2f ms CPU, GEMM %.2f ms (%.1f%%) at %.1f GFLOP/s, other "
      "%.2f ms; step rate %.1f GEMM GFLOP/s\n",
      1e3 * best_step, 1e3 * best_step_gemm, 100 * best_step_gemm / best_step,
      flops / best_step_gemm / 1e9, 1e3 * (best_step - best_step_gemm),
      flops / best_step / 1e9);
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem::bench

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "mlp_step_split",
           .summary = "Splits one rank's MLP training step (no DDP) into "
                      "phases and, per phase, the CPU time inside GEMMs and "
                      "the rest; thread CPU time, one thread.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  absl::StatusOr<std::vector<int64_t>> widths =
      tandem::bench::ParseWidths(absl::GetFlag(FLAGS_widths));
  const std::string kernels = absl::GetFlag(FLAGS_kernels);
  absl::Status usage = widths.status();
  for (const absl::Status& s :
       {tandem::bench::CheckInt("--batch", batch, 1, 65536),
        tandem::bench::CheckInt("--steps", steps, 1, 1000)}) {
    if (usage.ok()) usage = s;
  }
  const std::string zero_grad = absl::GetFlag(FLAGS_zero_grad);
  if (usage.ok() && zero_grad != "mark" && zero_grad != "fill") {
    usage = absl::InvalidArgumentError(
        "--zero_grad: expected mark or fill, got '" + zero_grad + "'");
  }
  if (usage.ok() && kernels != "fastest" && kernels != "pytorch") {
    usage = absl::InvalidArgumentError(
        "--kernels: expected fastest or pytorch, got '" + kernels + "'");
  }
  if (!usage.ok()) {
    std::fprintf(stderr, "mlp_step_split: %s\n",
                 std::string(usage.message()).c_str());
    return tandem::kExitUsageError;
  }
  tandem::cpu::SetKernelChoice(kernels == "pytorch"
                                   ? tandem::cpu::KernelChoice::kPyTorch
                                   : tandem::cpu::KernelChoice::kFastest);
  if (absl::Status s =
          tandem::bench::Run(*widths, batch, steps, zero_grad == "mark");
      !s.ok()) {
    std::fprintf(stderr, "mlp_step_split: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("mlp_step_split")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("mlp_step_split", Run(argc, argv));
}
