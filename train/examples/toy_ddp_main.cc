// //train/examples:toy_ddp — the DDP tutorials' toy example, end to end.
//
//   ./bazelw run //train/examples:toy_ddp                      # 2 simulated
//   ranks
//   ./bazelw run //train/examples:toy_ddp -- --world_size=4 --log_ranks=0
//   mpirun -np 3 bazel-bin/train/examples/toy_ddp --backend=mpi  # 3 processes
//   bazel-bin/train/examples/toy_ddp --backend=nccl               # every
//   visible GPU
//
// Prints what the tutorial's PyTorch script prints (see
// train/examples/toy_ddp_lib.h); bench/peers/compare_toy_ddp.py checks that
// line for line against PyTorch. On nccl each rank trains on its own GPU (same
// lines; the last digits of the losses may differ from the CPU's). Exits 0 on
// success, 1 when a rank fails (the error goes to stderr), 2 on a bad flag or a
// backend that cannot run here (--backend=nccl without a CUDA device says what
// to run instead).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/communicator.h"
#include "train/examples/toy_ddp_lib.h"
#include "train/launch/backend.h"

ABSL_FLAG(std::string, backend, "auto",
          "sim (ranks as threads in this process), mpi (one process per rank, "
          "under mpirun or srun), nccl (GPUs), or auto: mpi when started by "
          "mpirun/srun, nccl when a GPU is present, else sim.");
ABSL_FLAG(int, world_size, 0,
          "Number of ranks; 0 means the MPI job's size, the number of GPUs if "
          "there are any, else 2 simulated ranks.");
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
  absl::SetProgramUsageMessage(
      "The DDP tutorial's toy example: toy_ddp [--world_size=N] "
      "[--log_ranks=all|0] [--epochs --batch_size --lr --seed]");
  absl::ParseCommandLine(argc, argv);

  const std::string log_ranks = absl::GetFlag(FLAGS_log_ranks);
  if (log_ranks != "all" && log_ranks != "0") {
    std::fprintf(stderr, "toy_ddp: --log_ranks=%s; expected all or 0\n",
                 log_ranks.c_str());
    return 2;
  }
  absl::StatusOr<tandem::train::ResolvedBackend> backend =
      tandem::train::ResolveBackend(
          {.backend = absl::GetFlag(FLAGS_backend),
           .world_size = absl::GetFlag(FLAGS_world_size)});
  if (!backend.ok()) {
    std::fprintf(stderr, "toy_ddp: %s\n",
                 std::string(backend.status().message()).c_str());
    return 2;
  }

  tandem::train::ToyDdpConfig config;
  config.epochs = absl::GetFlag(FLAGS_epochs);
  config.batch_size = absl::GetFlag(FLAGS_batch_size);
  config.lr = absl::GetFlag(FLAGS_lr);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.log_all_ranks = log_ranks == "all";
  config.loss_precision = absl::GetFlag(FLAGS_loss_precision);

  const absl::Status status = tandem::train::RunOnBackend(
      *backend, [&config](tandem::comm::Communicator& comm) {
        // The rank's GPU on nccl, else the CPU.
        return tandem::train::RunToyDdp(comm, config,
                                        tandem::train::DeviceFor(comm));
      });
  if (!status.ok()) {
    std::fprintf(stderr, "toy_ddp: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
