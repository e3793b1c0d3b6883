// digits_ddp: a real data set trained with DDP on any world size — the
// 1797 hand-written 8x8 digits of train/data/digits.csv.gz.
//
//   sim::Run(4, [](int, comm::Communicator& comm) {
//     return train::RunDigitsDdp(comm, train::DigitsConfig()).status();
//   });
//
// The ranks of one process (the simulated cluster's threads) share one
// read-only copy of the file, loaded once (train/data/datasets/digits.h);
// every process loads it and makes the same fixed split (a permutation from
// `split_seed`; the first `test_fraction` of it is held out), scales the
// pixels from 0..16 to 0..1, builds an MLP 64 -> hidden -> 10 with ReLU from
// `seed`, and trains with SGD (momentum) under DDP, each rank on its
// DistributedSampler shard (shuffle, SetEpoch every epoch), with the global
// batch split across ranks. After every epoch
// rank 0 prints the GLOBAL mean training loss (all-reduced over every rank's
// samples); at the end rank 0 prints the GLOBAL test accuracy: each rank
// evaluates its own disjoint slice of the test set (no padding, so no sample
// counts twice) and the correct/total counts are all-reduced. Same seed and
// world size: bitwise identical results on any backend. The epochs run on
// train/loop's TrainingLoop (checkpoints, metrics, finite checks, --amp).
#ifndef TANDEM_TRAIN_EXAMPLES_DIGITS_DDP_DIGITS_DDP_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_DIGITS_DDP_DIGITS_DDP_LIB_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/examples/runner/example_options.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

// The example's options (example_options.h): flags, defaults, rules, in
// the order of the entries its checkpoints record.
#define TANDEM_DIGITS_DDP_OPTIONS(X)                                          \
  X(int64_t, epochs, 20, Between(0, kMaxEpochs), kAgreed, "Training epochs.") \
  X(int64_t, global_batch_size, 64, AtLeast(1), kAgreed,                      \
    "Samples per step over all ranks (each rank takes its share).")           \
  X(double, lr, 0.1, Any(), kAgreed, /* Sgd::CheckHyperParameters */          \
    "SGD learning rate.")                                                     \
  X(double, momentum, 0.9, Any(), kAgreed, "SGD momentum.")                   \
  X(int64_t, hidden, 128, AtLeast(1), kAgreed,                                \
    "Hidden units of the MLP 64-hidden-10.")                                  \
  X(uint64_t, seed, 0, Any(), kAgreed, "Seed of the model's initialisation.") \
  X(std::string, shard, "none", Any(), kAgreed, /* ParseShardMode */          \
    "none (DDP), zero1 (optimizer state sharded), zero2 (and "                \
    "gradients), fsdp (and parameters): the same accuracy in each.")          \
  X(std::string, amp, "off", OneOf("bf16", "f16", "off"), kAgreed,            \
    "Mixed precision: bf16, f16 (autocast) or off (f32).")                    \
  TANDEM_VIRTUAL_WORLD_OPTION(X)                                              \
  X(std::string, data, "train/data/digits.csv.gz", Any(), kLocal,             \
    "The digits CSV (64 pixel columns 0..16, then the label).")
TANDEM_EXAMPLE_OPTIONS(DigitsOptions, TANDEM_DIGITS_DDP_OPTIONS);

// The options: each rank takes global_batch_size / world size, so the
// optimisation (and the accuracy reached) barely depends on the world size;
// a world size that does not divide it is InvalidArgument naming the nearest
// valid sizes. --shard says how the ranks hold model, gradients and
// optimizer state (train/parallel/strategy.h), with the same weights, loss
// and accuracy in every mode.
struct DigitsConfig : DigitsOptions {
  // --checkpoint_dir / --checkpoint_every
  // (train/checkpoint/run_checkpointer.h): rank 0 saves the model, Sgd's
  // momentum buffers, the progress and the epoch's running loss sum; a folder
  // holding a checkpoint resumes from it, and the resumed run prints the same
  // epoch lines as an uninterrupted one (from the resumed epoch on) and ends
  // with the same weights, bit for bit.
  checkpoint::CheckpointOptions checkpoint;
  uint64_t split_seed = 42;  // which samples are held out
  double test_fraction = 0.2;
};

struct DigitsResult {
  double final_train_loss = 0;  // mean over every rank's samples, last epoch
  int64_t test_correct = 0;     // summed over ranks
  int64_t test_total = 0;       // the whole held-out set
  double test_accuracy() const {
    return test_total == 0 ? 0 : static_cast<double>(test_correct) / test_total;
  }
};

// Collective: every rank calls it. Prints through comm::RankPrinter on rank 0.
// The ranks first check that they agree on the config and that each value
// is in range (CheckRankFlags, rank_flags.h), then (once loaded) agree on
// the data set's size and hash (CheckRanksAgree: a difference fails every
// rank naming each rank's value); after every step, that the loss and
// the parameters (every kParameterCheckInterval steps and at the end of each
// epoch) are finite (CheckStepFinite: every rank stops with the epoch, step,
// rank and value).
// `device` is where this rank trains: the model is moved there before DDP
// wraps it and every batch is copied there; the loss and the predictions
// come back to the host, and the global sums (loss, correct/total) travel
// through `device` memory when it is not the CPU (NCCL moves device memory
// only). The CPU path makes no copies. On a GPU the printed values may
// differ from the CPU's in their last digits.
absl::StatusOr<DigitsResult> RunDigitsDdp(comm::Communicator& comm,
                                          const DigitsConfig& config,
                                          Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_DIGITS_DDP_DIGITS_DDP_LIB_H_
