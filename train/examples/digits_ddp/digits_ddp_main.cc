// //train/examples:digits_ddp — DDP on real data: the 1797 hand-written digits.
//
//   ./bazelw run //train/examples:digits_ddp -- --world_size=4
//   mpirun -np 4 bazel-bin/train/examples/digits_ddp --backend=mpi
//   bazel-bin/train/examples/digits_ddp --backend=nccl   # every visible GPU
//
// Rank 0 prints the global training loss after every epoch and, at the end,
// the global test accuracy (see train/examples/digits_ddp/digits_ddp_lib.h); on
// nccl each rank trains on its own GPU. The common flags (--backend,
// --world_size,
// --timeout) and the exit codes (0 success, 1 training failed, 2 usage error)
// come from train/examples/runner/example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "tensor/optim/sgd.h"
#include "train/examples/digits_ddp/digits_ddp_lib.h"
#include "train/examples/runner/example_main.h"
#include "train/parallel/strategy.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::DigitsOptions, TANDEM_DIGITS_DDP_OPTIONS)

int main(int argc, char** argv) {
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "digits_ddp",
       .summary = "trains an MLP on the UCI hand-written digits with "
                  "DistributedDataParallel and prints the global test "
                  "accuracy.",
       .paths = {{.flag = "data"}}},
      tandem::train::ConfigSetup<tandem::train::DigitsConfig>(
          ExampleOptionsFromFlags,
          [](const tandem::train::DigitsConfig& config) -> absl::Status {
            // A bad --shard, or --shard=fsdp with --amp=f16, is a usage
            // error too.
            auto mode = tandem::train::ParseShardMode(config.shard);
            if (!mode.ok()) return mode.status();
            if (absl::Status s = tandem::train::CheckShardAmp(
                    *mode, tandem::train::AutocastDType(config.amp));
                !s.ok()) {
              return s;
            }
            // A bad --lr or --momentum is a usage error, found before any
            // rank starts (each rank's Sgd::Create checks again).
            return tandem::optim::Sgd::CheckHyperParameters(
                config.lr, {.momentum = config.momentum});
          },
          tandem::train::RunDigitsDdp));
}
