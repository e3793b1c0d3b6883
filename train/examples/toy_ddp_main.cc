// //train/examples:toy_ddp — the DDP tutorials' toy example, end to end.
//
//   ./bazelw run //train/examples:toy_ddp                    # 2 simulated
//   ranks
//   ./bazelw run //train/examples:toy_ddp -- --world_size=4 --log_ranks=0
//   mpirun -np 3 bazel-bin/train/examples/toy_ddp --backend=mpi  # 3 processes
//   bazel-bin/train/examples/toy_ddp --backend=nccl           # every GPU
//
// Prints what the tutorial's PyTorch script prints (see
// train/examples/toy_ddp_lib.h); bench/peers/compare_toy_ddp.py checks that
// line for line against PyTorch. On nccl each rank trains on its own GPU (same
// lines; the last digits of the losses may differ from the CPU's). The common
// flags (--backend, --world_size, --timeout) and the exit codes (0 success, 1
// a rank failed, 2 usage error) come from train/examples/example_main.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/optim/sgd.h"
#include "train/examples/example_main.h"
#include "train/examples/toy_ddp_lib.h"

ABSL_FLAG(int64_t, epochs, 3, "Training epochs.");
ABSL_FLAG(int64_t, batch_size, 2, "Per-rank batch size (drop_last).");
ABSL_FLAG(double, lr, 0.5, "SGD learning rate.");
ABSL_FLAG(uint64_t, seed, 123,
          "Seed of the model's initialisation (torch.manual_seed).");
ABSL_FLAG(std::string, log_ranks, "all",
          "all: every rank prints its lines with a [GPUk] prefix (as the "
          "tutorial); 0: only rank 0's lines.");
ABSL_FLAG(int, loss_precision, 2,
          "Decimals of the printed loss (the tutorial prints 2).");

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "toy_ddp",
       .summary = "the DDP tutorial's toy example (a linear model on random "
                  "data, trained with DistributedDataParallel)."},
      []() -> absl::StatusOr<ExampleRank> {
        const std::string log_ranks = absl::GetFlag(FLAGS_log_ranks);
        if (log_ranks != "all" && log_ranks != "0") {
          return absl::InvalidArgumentError(
              absl::StrCat("--log_ranks=", log_ranks, "; expected all or 0"));
        }
        tandem::train::ToyDdpConfig config;
        config.epochs = absl::GetFlag(FLAGS_epochs);
        config.batch_size = absl::GetFlag(FLAGS_batch_size);
        config.lr = absl::GetFlag(FLAGS_lr);
        config.seed = absl::GetFlag(FLAGS_seed);
        config.log_all_ranks = log_ranks == "all";
        config.loss_precision = absl::GetFlag(FLAGS_loss_precision);
        absl::StatusOr<tandem::train::checkpoint::CheckpointOptions>
            checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        config.checkpoint = *checkpoint;
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
