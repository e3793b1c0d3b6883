// //train/examples:digits_ddp — DDP on real data: the 1797 hand-written digits.
//
//   ./bazelw run //train/examples:digits_ddp -- --world_size=4
//   mpirun -np 4 bazel-bin/train/examples/digits_ddp --backend=mpi
//   bazel-bin/train/examples/digits_ddp --backend=nccl   # every visible GPU
//
// Rank 0 prints the global training loss after every epoch and, at the end,
// the global test accuracy (see train/examples/digits_ddp_lib.h); on nccl each
// rank trains on its own GPU. Exits 0 on success, 1 when training fails, 2 on a
// bad flag or a backend that cannot run here (--backend=nccl without a CUDA
// device says what to run instead).
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "train/examples/digits_ddp_lib.h"
#include "train/launch/backend.h"

ABSL_FLAG(std::string, backend, "auto",
          "sim (ranks as threads), mpi (under mpirun/srun), nccl (GPUs), or "
          "auto: mpi under mpirun, nccl with GPUs, else sim.");
ABSL_FLAG(int, world_size, 0,
          "Ranks; 0: the MPI job's size, the number of GPUs, or 2 simulated.");
ABSL_FLAG(std::string, data, "train/data/digits.csv.gz",
          "The digits CSV (64 pixel columns 0..16, then the label).");
ABSL_FLAG(int64_t, epochs, 20, "Training epochs.");
ABSL_FLAG(int64_t, global_batch_size, 64,
          "Samples per step over all ranks (each rank takes its share).");
ABSL_FLAG(double, lr, 0.1, "SGD learning rate.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum.");
ABSL_FLAG(int64_t, hidden, 128, "Hidden units of the MLP 64-hidden-10.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the model's initialisation.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Trains an MLP on the UCI hand-written digits with "
      "DistributedDataParallel "
      "and prints the global test accuracy.\n"
      "  digits_ddp [--backend=sim|mpi|nccl|auto] [--world_size=N] "
      "[--epochs=20]");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<tandem::train::ResolvedBackend> backend =
      tandem::train::ResolveBackend(
          {.backend = absl::GetFlag(FLAGS_backend),
           .world_size = absl::GetFlag(FLAGS_world_size)});
  if (!backend.ok()) {
    std::fprintf(stderr, "digits_ddp: %s\n",
                 std::string(backend.status().message()).c_str());
    return 2;
  }
  tandem::train::DigitsConfig config;
  config.data_path = absl::GetFlag(FLAGS_data);
  config.epochs = absl::GetFlag(FLAGS_epochs);
  config.global_batch_size = absl::GetFlag(FLAGS_global_batch_size);
  config.lr = absl::GetFlag(FLAGS_lr);
  config.momentum = absl::GetFlag(FLAGS_momentum);
  config.hidden = absl::GetFlag(FLAGS_hidden);
  config.seed = absl::GetFlag(FLAGS_seed);
  absl::Status status = tandem::train::RunOnBackend(
      *backend, [&config](tandem::comm::Communicator& comm) {
        // The rank's GPU on nccl, else the CPU.
        return tandem::train::RunDigitsDdp(comm, config,
                                           tandem::train::DeviceFor(comm))
            .status();
      });
  if (!status.ok()) {
    std::fprintf(stderr, "digits_ddp: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
