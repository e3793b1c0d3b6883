// //train/examples:amp_ddp (alias //train:amp_ddp) — PyTorch's automatic
// mixed precision snippet (autocast + GradScaler) under DDP.
//
//   ./bazelw run //train:amp_ddp                          # 2 simulated ranks
//   ./bazelw run //train:amp_ddp -- --inject_inf=1:3      # watch a skip
//   ./bazelw run //train:amp_ddp -- --amp=f16 --comm_hook=bf16_compress
//   mpirun -np 2 bazel-bin/train/examples/amp_ddp --backend=mpi
//
// What it prints: amp_ddp_lib.h. The common flags and the exit codes:
// train/examples/runner/example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "tensor/optim/sgd.h"
#include "train/examples/amp_ddp/amp_ddp_lib.h"
#include "train/examples/runner/example_main.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::AmpDdpOptions, TANDEM_AMP_DDP_OPTIONS)

int main(int argc, char** argv) {
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "amp_ddp",
       .summary = "PyTorch's AMP snippet (Linear(10, 10), MSE, SGD, autocast "
                  "and GradScaler) under DistributedDataParallel, printing "
                  "each step's loss, scale and whether it was skipped."},
      tandem::train::ConfigSetup<tandem::train::AmpDdpConfig>(
          ExampleOptionsFromFlags,
          // A malformed RANK:STEP or a bad --lr is a usage error, found
          // before any rank starts (each rank checks again).
          [](const tandem::train::AmpDdpConfig& config) {
            absl::Status s =
                tandem::train::ParseInjectInfFlag(config.inject_inf).status();
            return s.ok() ? tandem::optim::Sgd::CheckHyperParameters(config.lr)
                          : s;
          },
          tandem::train::RunAmpDdp));
}
