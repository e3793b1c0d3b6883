// //train/examples:toy_ddp — the DDP tutorials' toy example, end to end.
//
//   ./bazelw run //train/examples:toy_ddp             # 2 simulated ranks
//   ./bazelw run //train/examples:toy_ddp -- --world_size=4 --log_ranks=0
//   mpirun -np 3 bazel-bin/train/examples/toy_ddp --backend=mpi  # 3 processes
//   bazel-bin/train/examples/toy_ddp --backend=nccl           # every GPU
//
// What it prints: toy_ddp_lib.h; bench/peers/compare_toy_ddp.py checks that
// line for line against PyTorch. The common flags and the exit codes:
// train/examples/runner/example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "tensor/optim/sgd.h"
#include "train/examples/runner/example_main.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::ToyDdpOptions, TANDEM_TOY_DDP_OPTIONS)

int main(int argc, char** argv) {
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "toy_ddp",
       .summary = "the DDP tutorial's toy example (a linear model on random "
                  "data, trained with DistributedDataParallel)."},
      tandem::train::ConfigSetup<tandem::train::ToyDdpConfig>(
          ExampleOptionsFromFlags,
          // A bad --lr is a usage error, found before any rank starts (each
          // rank's Sgd::Create checks again).
          [](const tandem::train::ToyDdpConfig& config) {
            return tandem::optim::Sgd::CheckHyperParameters(config.lr);
          },
          tandem::train::RunToyDdp));
}
