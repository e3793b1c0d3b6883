// //train/examples:amp_ddp (alias //train:amp_ddp) — PyTorch's automatic
// mixed precision snippet (autocast + GradScaler) under DDP.
//
//   ./bazelw run //train:amp_ddp                          # 2 simulated ranks
//   ./bazelw run //train:amp_ddp -- --inject_inf=1:3      # watch a skip
//   ./bazelw run //train:amp_ddp -- --amp=f16 --comm_hook=bf16_compress
//   mpirun -np 2 bazel-bin/train/examples/amp_ddp --backend=mpi
//
// What it prints is described in train/examples/amp_ddp_lib.h. The common
// flags and exit codes come from train/examples/example_main.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/optim/sgd.h"
#include "train/examples/amp_ddp_lib.h"
#include "train/examples/example_main.h"
#include "train/parallel/ddp/comm_hook.h"

ABSL_FLAG(std::string, amp, "bf16",
          "Autocast dtype: bf16, f16 or off (f32, GradScaler disabled).");
ABSL_FLAG(std::string, inject_inf, "",
          "RANK:STEP: put an inf into that rank's gradient at that step "
          "(from 0); every rank then skips the step and halves its scale.");
ABSL_FLAG(std::string, comm_hook, "allreduce",
          "DDP gradient hook: allreduce, fp16_compress or bf16_compress.");
ABSL_FLAG(int64_t, steps, 10, "Training steps.");
ABSL_FLAG(int64_t, batch_size, 20, "Per-rank batch size.");
ABSL_FLAG(double, lr, 0.001, "SGD learning rate.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the model and the data.");

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "amp_ddp",
       .summary = "PyTorch's AMP snippet (Linear(10, 10), MSE, SGD, autocast "
                  "and GradScaler) under DistributedDataParallel, printing "
                  "each step's loss, scale and whether it was skipped."},
      []() -> absl::StatusOr<ExampleRank> {
        tandem::train::AmpDdpConfig config;
        auto amp = tandem::train::ParseAmpFlag(absl::GetFlag(FLAGS_amp));
        if (!amp.ok()) return amp.status();
        config.amp = *amp;
        auto inject =
            tandem::train::ParseInjectInfFlag(absl::GetFlag(FLAGS_inject_inf));
        if (!inject.ok()) return inject.status();
        config.inject_inf = *inject;
        const std::string hook = absl::GetFlag(FLAGS_comm_hook);
        auto parsed = tandem::train::DdpCommHookFromName(hook.c_str());
        if (!parsed.has_value()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--comm_hook=", hook,
                           "; expected allreduce, fp16_compress or "
                           "bf16_compress"));
        }
        config.comm_hook = *parsed;
        config.steps = absl::GetFlag(FLAGS_steps);
        config.batch_size = absl::GetFlag(FLAGS_batch_size);
        config.lr = absl::GetFlag(FLAGS_lr);
        config.seed = absl::GetFlag(FLAGS_seed);
        absl::StatusOr<tandem::train::checkpoint::CheckpointOptions>
            checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        config.checkpoint = *checkpoint;
        if (config.steps < 1 || config.steps > 1000000 ||
            config.batch_size < 1 || config.batch_size > 65536) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--steps=", config.steps, " and --batch_size=", config.batch_size,
              "; both must be >= 1 (steps at most 1000000, batch_size at most "
              "65536)"));
        }
        if (absl::Status s =
                tandem::optim::Sgd::CheckHyperParameters(config.lr);
            !s.ok()) {
          return s;
        }
        return
            [config](tandem::comm::Communicator& comm, tandem::Device device) {
              return tandem::train::RunAmpDdp(comm, config, device);
            };
      });
}
