// resnet_ddp: torchvision's ResNet trained with DDP the way PyTorch users
// train it (the ImageNet/CIFAR reference recipe): SGD with momentum 0.9 and
// weight decay 5e-4, a step or cosine learning-rate schedule stepped once
// per epoch, optional SyncBatchNorm, on an image folder or on synthetic
// images (train/data/datasets/image_splits.h says how the held-out split
// is chosen).
//
//   sim::Run(2, [](int, comm::Communicator& comm) {
//     return train::RunResnetDdp(comm, train::ResnetConfig{}).status();
//   });
//
// Each rank builds the model from `seed` (torchvision's initial weights for
// torch.manual_seed(seed), bit for bit: tensor/nn/models/resnet.h), DDP
// broadcasts rank 0's weights and, before each training forward, its
// BatchNorm buffers. Each rank trains on its DistributedSampler shard
// (shuffled with the epoch, padded to equal shards, drop_last batches of
// `batch_size`); the images of a batch are made by `num_workers` threads,
// their random augmentations drawn from a generator fixed by the seed, the
// epoch and the rank (so a resumed epoch sees the same images). After every
// epoch rank 0 prints
//
//   Epoch 001/002 | train loss 2.3126 | val top-1 0.1406 (18/128) |
//   412.3 images/s
//
// the train loss the mean over every rank's samples of the epoch, top-1 on
// the whole held-out split (each rank scores a disjoint strided slice in
// eval mode, the counts all-reduced), images/s the epoch's training images
// over every rank divided by rank 0's wall time for its steps (it varies
// from run to run; everything else is a function of the flags).
#ifndef TANDEM_TRAIN_EXAMPLES_RESNET_DDP_RESNET_DDP_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_RESNET_DDP_RESNET_DDP_LIB_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/examples/runner/example_options.h"
#include "train/loop/training_loop.h"

namespace tandem::train {

// The example's options (example_options.h): flags, defaults, rules.
#define TANDEM_RESNET_DDP_OPTIONS(X)                                          \
  X(std::string, arch, "resnet18", OneOf("resnet18", "resnet34", "resnet50"), \
    kAgreed, "The model: resnet18, resnet34 or resnet50 (torchvision's).")    \
  X(std::string, data, "synthetic", Any(), kAgreed, /* CheckResnetConfig */   \
    "An image folder (one sub-folder per class; or train/ and val/ "          \
    "holding such folders, the held-out split) or synthetic (images "         \
    "drawn from --seed).")                                                    \
  X(int64_t, image_size, 32, Between(1, 4096), kAgreed,                       \
    "Images are SIZE x SIZE.")                                                \
  X(int64_t, num_classes, 0, Between(0, 100000), kAgreed,                     \
    "Classes; 0: the folder's class count (10 for synthetic data).")          \
  X(int64_t, synthetic_size, 512, Between(1, 1000000), kAgreed,               \
    "Training images with --data=synthetic (a quarter as many are held "      \
    "out).")                                                                  \
  X(double, val_fraction, 0.1, InOpenRange(0, 1), kAgreed,                    \
    "Held-out fraction of a folder without train/ and val/ (a fixed "         \
    "permutation from --split_seed).")                                        \
  X(uint64_t, split_seed, 42, Any(), kLocal, "Seed of the held-out split.")   \
  X(uint64_t, seed, 0, Any(), kAgreed,                                        \
    "Seed of the weights (torchvision's for torch.manual_seed), the "         \
    "shuffle and the synthetic images.")                                      \
  X(int64_t, batch_size, 32, Between(1, 65536), kAgreed,                      \
    "Images per rank per step.")                                              \
  X(int64_t, epochs, 2, Between(1, kMaxEpochs), kAgreed, "Training epochs.")  \
  X(int64_t, max_steps, 0, AtLeast(0), kAgreed,                               \
    "Stop after this many steps in all (0: no limit).")                       \
  X(double, lr, 0.1, Any(), kAgreed, /* CheckResnetConfig */                  \
    "SGD learning rate (momentum 0.9, weight decay 5e-4).")                   \
  X(std::string, lr_schedule, "step", OneOf("step", "cosine"), kAgreed,       \
    "step (x0.1 every --lr_step_epochs epochs) or cosine (to 0 over "         \
    "--epochs), stepped after each epoch.")                                   \
  X(int64_t, lr_step_epochs, 30, AtLeast(1), kAgreed,                         \
    "Epochs per step of --lr_schedule=step.")                                 \
  X(bool, sync_bn, false, Any(), kAgreed,                                     \
    "BatchNorm statistics over every rank's batch (SyncBatchNorm).")          \
  X(std::string, dtype, "f32", OneOf("f32", "f64"), kAgreed,                  \
    "The model's dtype: f32, or f64 (for comparing with PyTorch).")           \
  X(std::string, amp, "off", Any(), kAgreed, /* CheckResnetConfig */          \
    "Autocast dtype: off or bf16 (forward and loss in bf16).")                \
  X(int64_t, num_workers, 0, Between(0, 1024), kLocal,                        \
    "Threads per rank that make the images.")                                 \
  X(bool, print_step_losses, false, Any(), kLocal,                            \
    "Every rank prints its loss after every step (17 digits).")               \
  X(std::string, kernels, "fastest", OneOf("fastest", "pytorch"), kLocal,     \
    "CPU kernels: fastest (tandem's default) or pytorch (the GEMM and "       \
    "oneDNN convolution calls PyTorch 1.13 makes: "                           \
    "cpu::KernelChoice::kPyTorch).")                                          \
  X(std::string, save_init, "", Any(), kLocal,                                \
    "FILE: rank 0 writes the initial weights there (safetensors, "            \
    "PyTorch's state-dict names).")                                           \
  TANDEM_VIRTUAL_WORLD_OPTION(X)
TANDEM_EXAMPLE_OPTIONS(ResnetOptions, TANDEM_RESNET_DDP_OPTIONS);

// The options (--kernels is the process's: main sets it before any rank
// starts), and the checkpoint: rank 0 saves the model (BatchNorm's running
// statistics included), the optimizer's momentum, the schedule and the
// progress; a folder holding a checkpoint resumes from it and continues as
// the uninterrupted run would, bit for bit (the same weights, buffers and
// momentum at the end).
struct ResnetConfig : ResnetOptions {
  checkpoint::CheckpointOptions checkpoint;
};

struct ResnetResult {
  double train_loss = 0;  // the last epoch's, over every rank
  int64_t val_correct = 0;
  int64_t val_total = 0;
  int64_t steps = 0;  // steps this call ran (a resumed run: after resuming)
};

// The checks the options' rules cannot make, which need no communicator:
// --amp (off or bf16; f16 refused with the reason), --amp=bf16 only with
// --dtype=f32, --data a folder or synthetic, the SGD hyper-parameters.
// InvalidArgument naming the flag. RunResnetDdp makes them too, after the
// rules.
absl::Status CheckResnetConfig(const ResnetConfig& config);

// Collective: every rank calls it. Errors: ranks with different configs, a
// bad config, data that cannot be loaded (the file named), fewer held-out
// images than ranks or training images than a global batch, failures of
// DDP or the communicator, a non-finite loss or parameter.
absl::StatusOr<ResnetResult> RunResnetDdp(comm::Communicator& comm,
                                          const ResnetConfig& config,
                                          Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RESNET_DDP_RESNET_DDP_LIB_H_
