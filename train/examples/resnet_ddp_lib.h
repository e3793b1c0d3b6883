// resnet_ddp: torchvision's ResNet trained with DDP the way PyTorch users
// train it (the ImageNet/CIFAR reference recipe): SGD with momentum 0.9 and
// weight decay 5e-4, a step or cosine learning-rate schedule stepped once
// per epoch, optional SyncBatchNorm, on an image folder or on synthetic
// images (train/examples/resnet_ddp_data.h says how the held-out split is
// chosen).
//
//   sim::Run(2, [](int, comm::Communicator& comm) {
//     return train::RunResnetDdp(comm, {.arch = "resnet18"}).status();
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
#ifndef TANDEM_TRAIN_EXAMPLES_RESNET_DDP_LIB_H_
#define TANDEM_TRAIN_EXAMPLES_RESNET_DDP_LIB_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/run_checkpointer.h"
#include "train/examples/resnet_ddp_data.h"

namespace tandem::train {

struct ResnetConfig {
  std::string arch = "resnet18";  // resnet18, resnet34, resnet50
  ResnetDataOptions data;         // also holds seed, image size, classes
  int64_t batch_size = 32;        // per rank
  int64_t epochs = 2;
  int64_t max_steps = 0;  // 0: no limit; else stop after this many steps
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  // "step": StepLR(step_size = lr_step_epochs, gamma 0.1); "cosine":
  // CosineAnnealingLR(T_max = epochs). Stepped after each epoch.
  std::string lr_schedule = "step";
  int64_t lr_step_epochs = 30;
  bool sync_bn = false;  // ConvertSyncBatchNorm before DDP wraps the model
  // The model's dtype: f32, or f64 (the fidelity check against PyTorch;
  // the images are widened exactly).
  DType dtype = DType::kF32;
  // Autocast on the rank's device (bf16), nullopt: off. Only with f32.
  std::optional<DType> amp;
  int64_t num_workers = 0;  // DataLoader threads per rank
  // Print every rank's loss after every step ("step 3 loss <17 digits>"),
  // for comparing with bench/peers/resnet_ddp.py.
  bool print_step_losses = false;
  // Where rank 0 writes the initial weights (safetensors, state-dict names)
  // before the first step; empty: nowhere.
  std::string save_init;
  // Rank 0 saves the model (BatchNorm's running statistics included), the
  // optimizer's momentum, the schedule and the progress; a folder holding a
  // checkpoint resumes from it and continues as the uninterrupted run would,
  // bit for bit (the same weights, buffers and momentum at the end).
  checkpoint::CheckpointOptions checkpoint;
};

struct ResnetResult {
  double train_loss = 0;  // the last epoch's, over every rank
  int64_t val_correct = 0;
  int64_t val_total = 0;
  int64_t steps = 0;  // steps this call ran (a resumed run: after resuming)
};

// The flag checks that need no communicator (arch, schedule, sizes, amp with
// the dtype, hyper-parameters); InvalidArgument naming the flag and the
// accepted values. RunResnetDdp makes them too.
absl::Status CheckResnetConfig(const ResnetConfig& config);

// Collective: every rank calls it. Errors: ranks with different configs, a
// bad config, data that cannot be loaded (the file named), fewer held-out
// images than ranks or training images than a global batch, failures of
// DDP or the communicator, a non-finite loss or parameter.
absl::StatusOr<ResnetResult> RunResnetDdp(comm::Communicator& comm,
                                          const ResnetConfig& config,
                                          Device device = Device::CPU());

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_RESNET_DDP_LIB_H_
