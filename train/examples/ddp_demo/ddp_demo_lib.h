// The DDP tutorials' second script ("ddp_demo.py", launched with
// `torchrun --nproc_per_node=2 ddp_demo.py --batchSize 64 --epochs 10`), as a
// function every rank runs; ddp_demo_main.cc wraps it in a command line.
//
// Each rank: a RandomDataset of `dataset_size` images 3x32x32 drawn from
// torch.randn after torch.manual_seed(seed), all labelled 0; the model
//   conv2d  Conv2d(3, 16, 3)            [N, 3, 32, 32] -> [N, 16, 30, 30]
//   fc      Linear(16 * 30 * 30, num_classes) on the flattened conv output
//   softmax Softmax(dim=1)
// built right after the data from the same generator; CrossEntropyLoss on the
// softmax output (the tutorial's double softmax, kept); SGD lr 0.1 momentum
// 0.9; DDP; a DistributedSampler (shuffle, seed 0, set_epoch every epoch)
// feeding batches of `batchSize` without drop_last. Rank 0 prints, as the
// script does:
//
//   Step: 0, Loss: 2.3025851249694824
//   Epoch 0 Finished !
//
// (the loss as Python prints loss.item(): nn::PyFloatRepr). The PyTorch
// script is bench/peers/ddp_demo.py; bench/peers/compare_ddp_demo.py runs
// both and requires every loss bit-identical (docs/checkpoints.md says how:
// RunDdpDemo selects cpu::KernelChoice::kPyTorch for the process).
#ifndef TANDEM_TRAIN_EXAMPLES_DDP_DEMO_DDP_DEMO_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_DDP_DEMO_DDP_DEMO_LIB_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/examples/runner/example_options.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

// The script's flags (example_options.h), in the order of the entries its
// checkpoints record (--dataset-size and --num-classes spelled with the
// script's dashes there, as on the command line), and --seed, which is
// tandem's: the script seeds nothing, and a run must be repeatable to be
// compared. The bounds keep a typo from allocating without bound (65536
// images are 805 MB; a batch of 4096 needs ~650 MB for the convolution;
// 10000 classes make a 576 MB Linear) or running for ever.
#define TANDEM_DDP_DEMO_OPTIONS(X)                                            \
  X(int64_t, batchSize, 32, Between(1, 4096), kAgreed,                        \
    "Per-rank batch size (the script's).")                                    \
  X(int64_t, epochs, 10, Between(0, kMaxEpochs), kAgreed, "Training epochs.") \
  X(int64_t, dataset_size, 128, Between(1, 65536), kAgreed,                   \
    "Images in the RandomDataset (also --dataset-size).")                     \
  X(int64_t, num_classes, 10, Between(1, 10000), kAgreed,                     \
    "Outputs of the Linear layer (also --num-classes).")                      \
  X(uint64_t, seed, 0, Any(), kAgreed,                                        \
    "torch.manual_seed before the data and the model are made.")              \
  TANDEM_VIRTUAL_WORLD_OPTION(X)                                              \
  X(std::string, gpu_id, "", Any(), kLocal,                                   \
    "Sets CUDA_VISIBLE_DEVICES (e.g. 0,1) before any GPU is used, as "        \
    "the script does; empty: leave it alone.")
TANDEM_EXAMPLE_OPTIONS(DdpDemoOptions, TANDEM_DDP_DEMO_OPTIONS);

using DdpDemoConfig = WithCheckpoint<DdpDemoOptions>;

// Runs the script on `comm`'s rank (what every example's rank function
// does and its errors: runner/example_main.h).
absl::Status RunDdpDemo(comm::Communicator& comm, const DdpDemoConfig& config,
                        Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_DDP_DEMO_DDP_DEMO_LIB_H_
