// pipe_demo: model sharding with Pipe, as in PyTorch's pipeline tutorial:
// Stage1 = Linear(10, 10) on sim:0, Stage2 = Linear(10, 10) on sim:1, each
// batch in --chunks micro-batches on the GPipe schedule, MSE and SGD.
// Prints the stages, the clock cycles, each step's loss and where the
// output is, the bytes Forward keeps for backward and the peak bytes
// each device held.
//
//   ./bazelw run //train:pipe_demo -- --chunks=2 --checkpoint=except_last
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/sim_device/sim_device.h"
#include "train/demos/sim_devices_flag.h"
#include "train/parallel/devices/device_transfer.h"
#include "train/parallel/devices/pipe.h"

ABSL_FLAG(int64_t, chunks, 2, "Micro-batches per batch, 1..batch_size.");
// The demo holds a batch of 10 floats per row on each device: bounded, so
// a mistyped size is a usage error, not an allocation that aborts.
constexpr int64_t kMaxBatch = 65536;
constexpr int64_t kMaxSteps = 1000000;
ABSL_FLAG(std::string, checkpoint, "except_last",
          "Activation checkpointing: always, except_last or never.");
ABSL_FLAG(int64_t, batch_size, 20, "Rows per batch, 1..65536.");
ABSL_FLAG(int64_t, steps, 3, "Training steps, 1..1000000.");

namespace tandem::train {
namespace {

absl::Status Run(int64_t chunks, PipeCheckpoint mode, int64_t batch,
                 int64_t steps) {
  Generator gen(0);
  auto seq = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(seq->Append(nn::Linear::Create(10, 10, gen)));
  TANDEM_RETURN_IF_ERROR(seq->Append(nn::Linear::Create(10, 10, gen)));
  TANDEM_RETURN_IF_ERROR(seq->at(0)->To(Device::Sim(0)));
  TANDEM_RETURN_IF_ERROR(seq->at(1)->To(Device::Sim(1)));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<Pipe> pipe,
      Pipe::Create(std::move(seq), {.chunks = chunks, .checkpoint = mode}));
  for (size_t j = 0; j < pipe->stages().size(); ++j) {
    const Pipe::Stage& s = pipe->stages()[j];
    std::cout << "stage " << j << ": layers " << s.first_layer << ".."
              << s.first_layer + s.num_layers - 1 << " on "
              << s.device.ToString() << "\n";
  }
  std::cout << "GPipe clock cycles (micro-batch, stage):";
  TANDEM_ASSIGN_OR_RETURN(std::vector<int64_t> sizes,
                          ChunkSizes(batch, chunks));
  for (const auto& cycle :
       GpipeClockCycles(static_cast<int64_t>(sizes.size()),
                        static_cast<int64_t>(pipe->stages().size()))) {
    std::cout << " [";
    for (size_t c = 0; c < cycle.size(); ++c) {
      std::cout << (c ? " " : "") << "(" << cycle[c].first << ","
                << cycle[c].second << ")";
    }
    std::cout << "]";
  }
  std::cout << "\n";
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(pipe->Parameters(), 0.01));
  ResetSimPeakMemory();
  int64_t held = 0;  // bytes Forward left alive for backward
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<float> xv(static_cast<size_t>(batch * 10));
    for (size_t i = 0; i < xv.size(); ++i) {
      xv[i] = static_cast<float>((i * 37 + step * 11) % 97) / 97.f - 0.5f;
    }
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector(xv, {batch, 10}));
    TANDEM_ASSIGN_OR_RETURN(x, x.To(Device::Sim(0)));
    TANDEM_ASSIGN_OR_RETURN(
        Tensor target, Tensor::Zeros({batch, 10}, DType::kF32, Device::Sim(1)));
    pipe->ZeroGrad();
    const int64_t before = SimMemoryAllocated(0) + SimMemoryAllocated(1);
    TANDEM_ASSIGN_OR_RETURN(Tensor y, pipe->Forward(x));
    held = SimMemoryAllocated(0) + SimMemoryAllocated(1) - before;
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mse(y, target));
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    TANDEM_RETURN_IF_ERROR(sgd.Step());
    TANDEM_ASSIGN_OR_RETURN(double l, loss.Item());
    std::cout << "step " << step << ": input " << ShapeToString(x.shape())
              << " on " << x.device().ToString() << ", output "
              << ShapeToString(y.shape()) << " on " << y.device().ToString()
              << ", loss " << l << "\n";
  }
  std::cout << "checkpoint=" << PipeCheckpointName(mode)
            << ": bytes held from forward to backward " << held
            << ", peak bytes sim:0 " << SimMaxMemoryAllocated(0) << ", sim:1 "
            << SimMaxMemoryAllocated(1) << "\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem::train

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "pipe_demo",
           .summary = "Pipe's tutorial on simulated devices: two Linear(10, "
                      "10) stages on sim:0 and sim:1, micro-batches on the "
                      "GPipe schedule.",
           .flag_folders = {"train/demos/"},
           .help_epilogue = "Example: pipe_demo --chunks=4 --checkpoint=never"},
          argc, argv)) {
    return *exit_code;
  }
  const int64_t batch = absl::GetFlag(FLAGS_batch_size);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t chunks = absl::GetFlag(FLAGS_chunks);
  absl::StatusOr<tandem::train::PipeCheckpoint> mode =
      tandem::train::ParsePipeCheckpoint(absl::GetFlag(FLAGS_checkpoint));
  if (!mode.ok()) {
    std::cerr << "pipe_demo: --" << mode.status().message() << "\n";
    return tandem::kExitUsageError;
  }
  if (batch < 1 || batch > kMaxBatch || steps < 1 || steps > kMaxSteps ||
      chunks < 1 || chunks > batch) {
    std::cerr << "pipe_demo: --batch_size must be in 1.." << kMaxBatch
              << ", --steps in 1.." << kMaxSteps
              << " and --chunks in 1..batch_size (got chunks " << chunks
              << ", batch_size " << batch << ", steps " << steps << ")\n";
    return tandem::kExitUsageError;
  }
  absl::StatusOr<int64_t> devices = tandem::train::InstallDevicesFromFlag(2);
  if (!devices.ok()) {
    std::cerr << "pipe_demo: " << devices.status().message() << "\n";
    return tandem::kExitUsageError;
  }
  if (*devices < 2) {
    std::cerr << "pipe_demo: the two stages need --devices >= 2 (got "
              << *devices << ")\n";
    return tandem::kExitUsageError;
  }
  absl::Status s = tandem::train::Run(chunks, *mode, batch, steps);
  if (!s.ok()) {
    std::cerr << "pipe_demo: " << s.message() << "\n";
    return tandem::kExitRuntimeError;
  }
  return tandem::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("pipe_demo")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("pipe_demo", Run(argc, argv));
}
