// devices_benchmark: single-process multi-device training on simulated
// devices.
//
//   ./bazelw run -c opt //bench:devices_benchmark               # both parts
//   ./bazelw run -c opt //bench:devices_benchmark -- --part=pipe --steps=3
//
// Part "dp": the ddp_benchmark's large MLP (1024 -> 4096 -> 4096 -> 1024,
// ReLU between, f32, Sgd lr 0.01, CrossEntropy) trained three ways, each
// step on a global batch of 128 rows:
//   one_device  the model on sim:0, the whole batch at once;
//   dp2         DataParallel over sim:0 and sim:1 (64 rows each): scatter,
//               replication of the 25 M parameters onto sim:1, two replica
//               threads, gather, backward on the calling thread (both
//               replicas' graphs, one after the other), the replicas'
//               gradients reduce-added onto sim:0, the step on sim:0.
// DDP on 2 simulated ranks (64 rows each, the same model) is
// `./bazelw run -c opt //bench:ddp_benchmark -- --models=large
// --world_sizes=2`; bench/PERFORMANCE.md puts the figures side by side.
//
// Part "pipe": MLP 2048 -> 2048 x 4 (ReLU between, f32), layers 0-3 on
// sim:0 and 4-7 on sim:1, batch 128, Pipe with chunks 1..8
// (checkpoint=never), against the unsplit model on one device. GPipe's
// bubble: with p stages and m micro-batches a batch takes (m + p - 1) / m
// stage-times of one micro-batch pass per stage... i.e. the predicted step
// time is T_one_device * (m + p - 1) / (m * p), perfect overlap otherwise.
//
// Timing: --warmup steps, then --repeats segments of --steps steps; the
// step time is the fastest segment's mean (noise only ever slows a segment
// down). Output: a table and one `RESULT key=value ...` line per case.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/sim_device/sim_device.h"
#include "train/parallel/devices/data_parallel.h"
#include "train/parallel/devices/pipe.h"

ABSL_FLAG(std::string, part, "dp,pipe", "Comma-separated parts: dp, pipe.");
ABSL_FLAG(int64_t, steps, 3, "Steps per timed segment, >= 1.");
ABSL_FLAG(int64_t, repeats, 3, "Timed segments, >= 1.");
ABSL_FLAG(int64_t, warmup, 1, "Untimed steps first, >= 0.");
ABSL_FLAG(std::string, chunks, "1,2,4,8", "Pipe's micro-batch counts.");

namespace tandem {
namespace {

using Step = std::function<absl::Status()>;

// Fastest segment's mean step time in milliseconds.
absl::StatusOr<double> Time(const Step& step) {
  for (int64_t i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) {
    TANDEM_RETURN_IF_ERROR(step());
  }
  double best = 1e300;
  for (int64_t r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < absl::GetFlag(FLAGS_steps); ++s) {
      TANDEM_RETURN_IF_ERROR(step());
    }
    const std::chrono::duration<double, std::milli> took =
        std::chrono::steady_clock::now() - start;
    best = std::min(
        best, took.count() / static_cast<double>(absl::GetFlag(FLAGS_steps)));
  }
  return best;
}

absl::StatusOr<std::unique_ptr<nn::Module>> Mlp(
    const std::vector<int64_t>& widths) {
  Generator gen(0);
  auto m = std::make_unique<nn::Sequential>();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) TANDEM_RETURN_IF_ERROR(m->Append(std::make_unique<nn::ReLU>()));
    TANDEM_RETURN_IF_ERROR(
        m->Append(nn::Linear::Create(widths[i], widths[i + 1], gen)));
  }
  return std::unique_ptr<nn::Module>(std::move(m));
}

absl::StatusOr<Tensor> Rows(int64_t rows, int64_t cols, Device device) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(i % 101) / 101.f - 0.5f;
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(v, {rows, cols}));
  return t.To(device);
}

absl::StatusOr<Tensor> Labels(int64_t rows, int64_t classes, Device device) {
  std::vector<int64_t> v(static_cast<size_t>(rows));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<int64_t>(i) % classes;
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(v));
  return t.To(device);
}

// forward, CrossEntropy, zero_grad, backward, Sgd step.
Step TrainStep(nn::Module& model, optim::Sgd& sgd, const Tensor& x,
               const Tensor& y) {
  return [&model, &sgd, x, y]() -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, model.Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, y));
    model.ZeroGrad();
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    return sgd.Step();
  };
}

void Report(const std::string& part, const std::string& mode, int64_t batch,
            double ms, const std::string& extra) {
  std::cout << "RESULT part=" << part << " mode=" << mode << " batch=" << batch
            << " step_ms=" << ms
            << " samples_per_s=" << static_cast<double>(batch) * 1000.0 / ms
            << extra << "\n";
}

absl::Status RunDp() {
  const std::vector<int64_t> widths = {1024, 4096, 4096, 1024};
  const int64_t batch = 128;
  const Device s0 = Device::Sim(0);
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Rows(batch, 1024, s0));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Labels(batch, 1024, s0));
  {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model, Mlp(widths));
    TANDEM_RETURN_IF_ERROR(model->To(s0));
    TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                            optim::Sgd::Create(model->Parameters(), 0.01));
    TANDEM_ASSIGN_OR_RETURN(double ms, Time(TrainStep(*model, sgd, x, y)));
    Report("dp", "one_device", batch, ms, "");
  }
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model, Mlp(widths));
  TANDEM_RETURN_IF_ERROR(model->To(s0));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<train::DataParallel> dp,
      train::DataParallel::Create(std::move(model),
                                  [&widths] { return Mlp(widths); },
                                  {.device_ids = {s0, Device::Sim(1)}}));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(dp->Parameters(), 0.01));
  ResetSimCopyCounters();
  TANDEM_RETURN_IF_ERROR(TrainStep(*dp, sgd, x, y)());
  const int64_t copied =
      SimCopiedBytes(s0, Device::Sim(1)) + SimCopiedBytes(Device::Sim(1), s0);
  TANDEM_ASSIGN_OR_RETURN(double ms, Time(TrainStep(*dp, sgd, x, y)));
  Report("dp", "dp2", batch, ms,
         " cross_device_bytes_per_step=" + std::to_string(copied));
  return absl::OkStatus();
}

absl::Status RunPipe() {
  const std::vector<int64_t> widths = {2048, 2048, 2048, 2048, 2048};
  const int64_t batch = 128;
  const int64_t p = 2;
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Rows(batch, 2048, Device::Sim(0)));
  TANDEM_ASSIGN_OR_RETURN(Tensor y0, Labels(batch, 2048, Device::Sim(0)));
  TANDEM_ASSIGN_OR_RETURN(Tensor y1, Labels(batch, 2048, Device::Sim(1)));
  double one = 0;
  {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model, Mlp(widths));
    TANDEM_RETURN_IF_ERROR(model->To(Device::Sim(0)));
    TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                            optim::Sgd::Create(model->Parameters(), 0.01));
    TANDEM_ASSIGN_OR_RETURN(one, Time(TrainStep(*model, sgd, x, y0)));
    Report("pipe", "one_device", batch, one, "");
  }
  std::vector<int64_t> chunk_list;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_chunks), ',')) {
    int64_t m = 0;
    if (!absl::SimpleAtoi(c, &m) || m < 1 || m > batch) {
      return absl::InvalidArgumentError(
          "--chunks must list integers in 1..128");
    }
    chunk_list.push_back(m);
  }
  for (int64_t m : chunk_list) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model, Mlp(widths));
    auto* seq = static_cast<nn::Sequential*>(model.get());
    for (int64_t l = 0; l < seq->size(); ++l) {
      TANDEM_RETURN_IF_ERROR(seq->at(l)->To(
          l < seq->size() / 2 ? Device::Sim(0) : Device::Sim(1)));
    }
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<train::Pipe> pipe,
        train::Pipe::Create(
            std::move(model),
            {.chunks = m, .checkpoint = train::PipeCheckpoint::kNever}));
    TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                            optim::Sgd::Create(pipe->Parameters(), 0.01));
    TANDEM_ASSIGN_OR_RETURN(double ms, Time(TrainStep(*pipe, sgd, x, y1)));
    const double predicted =
        one * static_cast<double>(m + p - 1) / static_cast<double>(m * p);
    Report("pipe", "chunks" + std::to_string(m), batch, ms,
           " bubble_predicted_ms=" + std::to_string(predicted) +
               " bubble_fraction=" +
               std::to_string(static_cast<double>(p - 1) /
                              static_cast<double>(m + p - 1)));
  }
  // Memory: bytes a Forward leaves alive for backward, and the peak of one
  // step, per checkpoint mode (chunks 4).
  for (train::PipeCheckpoint mode :
       {train::PipeCheckpoint::kNever, train::PipeCheckpoint::kExceptLast,
        train::PipeCheckpoint::kAlways}) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> model, Mlp(widths));
    auto* seq = static_cast<nn::Sequential*>(model.get());
    for (int64_t l = 0; l < seq->size(); ++l) {
      TANDEM_RETURN_IF_ERROR(seq->at(l)->To(
          l < seq->size() / 2 ? Device::Sim(0) : Device::Sim(1)));
    }
    TANDEM_ASSIGN_OR_RETURN(
        std::unique_ptr<train::Pipe> pipe,
        train::Pipe::Create(std::move(model),
                            {.chunks = 4, .checkpoint = mode}));
    const int64_t before = SimMemoryAllocated(0) + SimMemoryAllocated(1);
    ResetSimPeakMemory();
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, pipe->Forward(x));
    const int64_t held = SimMemoryAllocated(0) + SimMemoryAllocated(1) - before;
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, y1));
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    std::cout << "MEMORY part=pipe chunks=4 checkpoint="
              << train::PipeCheckpointName(mode)
              << " held_after_forward_bytes=" << held
              << " peak_bytes_sim0=" << SimMaxMemoryAllocated(0)
              << " peak_bytes_sim1=" << SimMaxMemoryAllocated(1)
              << " (parameters and inputs included)\n";
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "devices_benchmark",
           .summary = "DataParallel and Pipe on simulated devices: step "
                      "times against one device and GPipe's bubble.",
           .flag_folders = {"bench/devices_benchmark"}},
          argc, argv)) {
    return *exit_code;
  }
  if (absl::GetFlag(FLAGS_steps) < 1 || absl::GetFlag(FLAGS_repeats) < 1 ||
      absl::GetFlag(FLAGS_warmup) < 0) {
    std::cerr << "devices_benchmark: --steps and --repeats must be >= 1, "
                 "--warmup >= 0\n";
    return tandem::kExitUsageError;
  }
  if (!tandem::InstallSimDevices(2).ok()) return tandem::kExitRuntimeError;
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_part), ',')) {
    absl::Status s;
    if (part == "dp") {
      s = tandem::RunDp();
    } else if (part == "pipe") {
      s = tandem::RunPipe();
    } else {
      std::cerr << "devices_benchmark: unknown --part '" << part
                << "' (dp, pipe)\n";
      return tandem::kExitUsageError;
    }
    if (!s.ok()) {
      std::cerr << "devices_benchmark: " << s.message() << "\n";
      return tandem::kExitRuntimeError;
    }
  }
  return tandem::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("devices_benchmark")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("devices_benchmark", Run(argc, argv));
}
