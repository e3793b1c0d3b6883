// //train/examples:digits_ddp — DDP on real data: the 1797 hand-written digits.
//
//   ./bazelw run //train/examples:digits_ddp -- --world_size=4
//   mpirun -np 4 bazel-bin/train/examples/digits_ddp --backend=mpi
//   bazel-bin/train/examples/digits_ddp --backend=nccl   # every visible GPU
//
// Rank 0 prints the global training loss after every epoch and, at the end,
// the global test accuracy (see train/examples/digits_ddp_lib.h); on nccl each
// rank trains on its own GPU. The common flags (--backend, --world_size,
// --timeout) and the exit codes (0 success, 1 training failed, 2 usage error)
// come from train/examples/example_main.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "tensor/optim/sgd.h"
#include "train/examples/digits_ddp_lib.h"
#include "train/examples/example_main.h"
#include "train/parallel/strategy.h"

ABSL_FLAG(std::string, data, "train/data/digits.csv.gz",
          "The digits CSV (64 pixel columns 0..16, then the label).");
ABSL_FLAG(int64_t, epochs, 20, "Training epochs.");
ABSL_FLAG(int64_t, global_batch_size, 64,
          "Samples per step over all ranks (each rank takes its share).");
ABSL_FLAG(double, lr, 0.1, "SGD learning rate.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum.");
ABSL_FLAG(int64_t, hidden, 128, "Hidden units of the MLP 64-hidden-10.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the model's initialisation.");
ABSL_FLAG(std::string, shard, "none",
          "none (DDP), zero1 (optimizer state sharded), zero2 (and "
          "gradients), fsdp (and parameters): the same accuracy in each.");
ABSL_FLAG(std::string, amp, "off",
          "Mixed precision: bf16, f16 (autocast) or off (f32).");

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "digits_ddp",
       .summary = "trains an MLP on the UCI hand-written digits with "
                  "DistributedDataParallel and prints the global test "
                  "accuracy.",
       .paths = {{.flag = "data"}}},
      []() -> absl::StatusOr<ExampleRank> {
        tandem::train::DigitsConfig config;
        config.data_path = absl::GetFlag(FLAGS_data);
        config.epochs = absl::GetFlag(FLAGS_epochs);
        config.global_batch_size = absl::GetFlag(FLAGS_global_batch_size);
        config.lr = absl::GetFlag(FLAGS_lr);
        config.momentum = absl::GetFlag(FLAGS_momentum);
        config.hidden = absl::GetFlag(FLAGS_hidden);
        config.seed = absl::GetFlag(FLAGS_seed);
        absl::StatusOr<tandem::train::checkpoint::CheckpointOptions>
            checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        config.checkpoint = *checkpoint;
        config.shard = absl::GetFlag(FLAGS_shard);
        // A bad --shard is a usage error too.
        if (absl::StatusOr<tandem::train::ShardMode> mode =
                tandem::train::ParseShardMode(config.shard);
            !mode.ok()) {
          return mode.status();
        } else {
          auto amp = tandem::train::ParseAmpFlag(absl::GetFlag(FLAGS_amp));
          if (!amp.ok()) return amp.status();
          config.amp = *amp;
          if (absl::Status s = tandem::train::CheckShardAmp(*mode, *amp);
              !s.ok()) {
            return s;
          }
        }
        // A bad --lr or --momentum is a usage error, found before any rank
        // starts (each rank's Sgd::Create checks again).
        if (absl::Status s = tandem::optim::Sgd::CheckHyperParameters(
                config.lr, {.momentum = config.momentum});
            !s.ok()) {
          return s;
        }
        return
            [config](tandem::comm::Communicator& comm, tandem::Device device) {
              return tandem::train::RunDigitsDdp(comm, config, device).status();
            };
      });
}
