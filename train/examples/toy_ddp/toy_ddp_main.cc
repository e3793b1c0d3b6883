// //train/examples:toy_ddp — the DDP tutorials' toy example, end to end.
//
//   ./bazelw run //train/examples:toy_ddp                    # 2 simulated
//   ranks
//   ./bazelw run //train/examples:toy_ddp -- --world_size=4 --log_ranks=0
//   mpirun -np 3 bazel-bin/train/examples/toy_ddp --backend=mpi  # 3 processes
//   bazel-bin/train/examples/toy_ddp --backend=nccl           # every GPU
//
// Prints what the tutorial's PyTorch script prints (see
// train/examples/toy_ddp/toy_ddp_lib.h); bench/peers/compare_toy_ddp.py checks
// that line for line against PyTorch. On nccl each rank trains on its own GPU
// (same lines; the last digits of the losses may differ from the CPU's). The
// common flags (--backend, --world_size, --timeout) and the exit codes (0
// success, 1 a rank failed, 2 usage error) come from
// train/examples/runner/example_main.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "tensor/optim/sgd.h"
#include "train/examples/runner/example_main.h"
#include "train/examples/toy_ddp/toy_ddp_lib.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::ToyDdpOptions, TANDEM_TOY_DDP_OPTIONS)

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "toy_ddp",
       .summary = "the DDP tutorial's toy example (a linear model on random "
                  "data, trained with DistributedDataParallel)."},
      []() -> absl::StatusOr<ExampleRank> {
        auto options = ExampleOptionsFromFlags();
        if (!options.ok()) return options.status();
        auto checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        const tandem::train::ToyDdpConfig config{*options, *checkpoint};
        // A bad --lr is a usage error, found before any rank starts (each
        // rank's Sgd::Create checks again).
        if (absl::Status s =
                tandem::optim::Sgd::CheckHyperParameters(config.lr);
            !s.ok()) {
          return s;
        }
        return
            [config](tandem::comm::Communicator& comm, tandem::Device device) {
              return tandem::train::RunToyDdp(comm, config, device);
            };
      });
}
