// //train/examples:amp_ddp (alias //train:amp_ddp) — PyTorch's automatic
// mixed precision snippet (autocast + GradScaler) under DDP.
//
//   ./bazelw run //train:amp_ddp                          # 2 simulated ranks
//   ./bazelw run //train:amp_ddp -- --inject_inf=1:3      # watch a skip
//   ./bazelw run //train:amp_ddp -- --amp=f16 --comm_hook=bf16_compress
//   mpirun -np 2 bazel-bin/train/examples/amp_ddp --backend=mpi
//
// What it prints is described in train/examples/amp_ddp/amp_ddp_lib.h. The
// common flags and exit codes come from train/examples/runner/example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "tensor/optim/sgd.h"
#include "train/examples/amp_ddp/amp_ddp_lib.h"
#include "train/examples/runner/example_main.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::AmpDdpOptions, TANDEM_AMP_DDP_OPTIONS)

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "amp_ddp",
       .summary = "PyTorch's AMP snippet (Linear(10, 10), MSE, SGD, autocast "
                  "and GradScaler) under DistributedDataParallel, printing "
                  "each step's loss, scale and whether it was skipped."},
      []() -> absl::StatusOr<ExampleRank> {
        auto options = ExampleOptionsFromFlags();
        if (!options.ok()) return options.status();
        // A malformed RANK:STEP is a usage error (each rank parses it again).
        if (absl::Status s =
                tandem::train::ParseInjectInfFlag(options->inject_inf).status();
            !s.ok()) {
          return s;
        }
        auto checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        const tandem::train::AmpDdpConfig config{*options, *checkpoint};
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
