// The DDP tutorials' toy example (Sebastian Raschka's "ddp-script.py"), as a
// function every rank runs; toy_ddp_main.cc wraps it in a command line.
//
//   sim::Run(2, [](int rank, comm::Communicator& comm) {
//     return train::RunToyDdp(comm, train::ToyDdpConfig());
//   });
//
// Each rank: five training points and two test points in 2-d; an MLP
// 2 -> 30 -> 20 -> 2 with ReLU built right after seeding the generator
// (PyTorch's torch.manual_seed(seed) then nn.Linear init); SGD; DDP; a
// DistributedSampler (shuffle, seed 0, SetEpoch every epoch) feeding batches
// with drop_last; one loss line per step; then the training accuracy over the
// rank's own shard (the drop_last batches of the last epoch's order) and the
// test accuracy over the whole test set. Lines, as the tutorial prints them:
//
//   [GPU0] Epoch: 001/003 | Batchsize 002 | Train/Val Loss: 0.66
//   [GPU0] Training accuracy 1.0
//   [GPU0] Test accuracy 1.0
//
// bench/peers/toy_ddp.py is the same script in PyTorch and
// bench/peers/compare_toy_ddp.py checks that both print the same lines.
#ifndef TANDEM_TRAIN_EXAMPLES_TOY_DDP_TOY_DDP_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_TOY_DDP_TOY_DDP_LIB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "train/examples/runner/example_options.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

// The example's options (example_options.h): flags, defaults, rules.
#define TANDEM_TOY_DDP_OPTIONS(X)                                            \
  X(int64_t, epochs, 3, Between(0, kMaxEpochs), kAgreed, "Training epochs.") \
  X(int64_t, batch_size, 2, AtLeast(1), kAgreed,                             \
    "Per-rank batch size (drop_last).")                                      \
  X(double, lr, 0.5, Any(), kAgreed, /* Sgd::CheckHyperParameters */         \
    "SGD learning rate.")                                                    \
  X(uint64_t, seed, 123, Any(), kAgreed,                                     \
    "Seed of the model's initialisation (torch.manual_seed).")               \
  X(int, loss_precision, 2, Between(0, 17), kAgreed,                         \
    "Decimals of the printed loss (the tutorial prints 2).")                 \
  X(std::string, log_ranks, "all", OneOf("all", "0"), kAgreed,               \
    "all: every rank prints its lines with a [GPUk] prefix (as the "         \
    "tutorial); 0: only rank 0's lines.")                                    \
  TANDEM_VIRTUAL_WORLD_OPTION(X)
TANDEM_EXAMPLE_OPTIONS(ToyDdpOptions, TANDEM_TOY_DDP_OPTIONS);

using ToyDdpConfig = WithCheckpoint<ToyDdpOptions>;

// Runs the tutorial on `comm`'s rank (what every example's rank function
// does and its errors: runner/example_main.h). The model is moved to `device`
// before DDP wraps it (model.to(rank) in the tutorial) and every batch is
// copied there; on a GPU the printed values may differ from the CPU's in
// their last digits. An empty shard, where the tutorial divides by zero, is
// an error that says to lower --batch_size or the world size.
absl::Status RunToyDdp(comm::Communicator& comm, const ToyDdpConfig& config,
                       Device device = Device::CPU());

// The tutorial's NeuralNetwork(num_inputs=2, num_outputs=2): an MLP
// 2 -> 30 -> 20 -> 2 with ReLU, initialised from `gen` as nn.Linear does,
// its parameters named as in PyTorch: "layers.0.weight", "layers.0.bias",
// "layers.2.weight", ... (so a checkpoint loads into the PyTorch script's
// model with load_state_dict).
absl::StatusOr<std::unique_ptr<nn::Module>> BuildToyModel(Generator& gen);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_TOY_DDP_TOY_DDP_LIB_H_
