// //train/examples:resnet_ddp (alias //train:resnet_ddp) — torchvision's
// ResNet trained with DDP on an image folder or on synthetic images.
//
//   ./bazelw run //train:resnet_ddp                      # 2 simulated ranks
//   ./bazelw run //train:resnet_ddp -- --data=/data/cifar10 --epochs=30
//       --lr_schedule=cosine --sync_bn --world_size=4     (one line)
//   mpirun -np 2 bazel-bin/train/examples/resnet_ddp --backend=mpi
//
// What it prints is described in train/examples/resnet_ddp_lib.h; where the
// images and the held-out split come from in resnet_ddp_data.h. The common
// flags (backend, world size, checkpoints, trace, progress, metrics) and the
// exit codes come from train/examples/example_main.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/cpu/blas.h"
#include "train/examples/example_main.h"
#include "train/examples/resnet_ddp_lib.h"

ABSL_FLAG(std::string, arch, "resnet18",
          "The model: resnet18, resnet34 or resnet50 (torchvision's).");
ABSL_FLAG(std::string, data, "synthetic",
          "An image folder (one sub-folder per class; or train/ and val/ "
          "holding such folders, the held-out split) or synthetic (images "
          "drawn from --seed).");
ABSL_FLAG(int64_t, num_classes, 0,
          "Classes; 0: the folder's class count (10 for synthetic data).");
ABSL_FLAG(int64_t, image_size, 32, "Images are SIZE x SIZE.");
ABSL_FLAG(int64_t, synthetic_size, 512,
          "Training images with --data=synthetic (a quarter as many are held "
          "out).");
ABSL_FLAG(double, val_fraction, 0.1,
          "Held-out fraction of a folder without train/ and val/ (a fixed "
          "permutation from --split_seed).");
ABSL_FLAG(uint64_t, split_seed, 42, "Seed of the held-out split.");
ABSL_FLAG(int64_t, batch_size, 32, "Images per rank per step.");
ABSL_FLAG(int64_t, epochs, 2, "Training epochs.");
ABSL_FLAG(int64_t, max_steps, 0,
          "Stop after this many steps in all (0: no limit).");
ABSL_FLAG(double, lr, 0.1,
          "SGD learning rate (momentum 0.9, weight decay "
          "5e-4).");
ABSL_FLAG(std::string, lr_schedule, "step",
          "step (x0.1 every --lr_step_epochs epochs) or cosine (to 0 over "
          "--epochs), stepped after each epoch.");
ABSL_FLAG(int64_t, lr_step_epochs, 30,
          "Epochs per step of --lr_schedule=step.");
ABSL_FLAG(bool, sync_bn, false,
          "BatchNorm statistics over every rank's batch (SyncBatchNorm).");
ABSL_FLAG(std::string, dtype, "f32",
          "The model's dtype: f32, or f64 (for comparing with PyTorch).");
ABSL_FLAG(std::string, amp, "off",
          "Autocast dtype: off or bf16 (forward and loss in bf16).");
ABSL_FLAG(int64_t, num_workers, 0, "Threads per rank that make the images.");
ABSL_FLAG(uint64_t, seed, 0,
          "Seed of the weights (torchvision's for torch.manual_seed), the "
          "shuffle and the synthetic images.");
ABSL_FLAG(bool, print_step_losses, false,
          "Every rank prints its loss after every step (17 digits).");
ABSL_FLAG(std::string, kernels, "fastest",
          "CPU kernels: fastest (tandem's default) or pytorch (the GEMM and "
          "oneDNN convolution calls PyTorch 1.13 makes: "
          "cpu::KernelChoice::kPyTorch).");
ABSL_FLAG(std::string, save_init, "",
          "FILE: rank 0 writes the initial weights there (safetensors, "
          "PyTorch's state-dict names).");

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "resnet_ddp",
       .summary = "torchvision's ResNet-18/34/50 under DistributedDataParallel "
                  "(SGD momentum 0.9, weight decay 5e-4, step or cosine "
                  "schedule, optional SyncBatchNorm) on an image folder or "
                  "synthetic images; rank 0 prints per epoch the train loss, "
                  "the held-out top-1 and images/s.",
       .paths = {{.flag = "data", .not_a_path = "synthetic"},
                 {.flag = "save_init",
                  .role = tandem::base::PathRole::kOutput}}},
      []() -> absl::StatusOr<ExampleRank> {
        tandem::train::ResnetConfig config;
        config.arch = absl::GetFlag(FLAGS_arch);
        config.data.data = absl::GetFlag(FLAGS_data);
        config.data.num_classes = absl::GetFlag(FLAGS_num_classes);
        config.data.image_size = absl::GetFlag(FLAGS_image_size);
        config.data.synthetic_size = absl::GetFlag(FLAGS_synthetic_size);
        config.data.val_fraction = absl::GetFlag(FLAGS_val_fraction);
        config.data.split_seed = absl::GetFlag(FLAGS_split_seed);
        config.data.seed = absl::GetFlag(FLAGS_seed);
        config.batch_size = absl::GetFlag(FLAGS_batch_size);
        config.epochs = absl::GetFlag(FLAGS_epochs);
        config.max_steps = absl::GetFlag(FLAGS_max_steps);
        config.lr = absl::GetFlag(FLAGS_lr);
        config.lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
        config.lr_step_epochs = absl::GetFlag(FLAGS_lr_step_epochs);
        config.sync_bn = absl::GetFlag(FLAGS_sync_bn);
        config.num_workers = absl::GetFlag(FLAGS_num_workers);
        config.print_step_losses = absl::GetFlag(FLAGS_print_step_losses);
        config.save_init = absl::GetFlag(FLAGS_save_init);
        const std::string dtype = absl::GetFlag(FLAGS_dtype);
        if (dtype == "f32") {
          config.dtype = tandem::DType::kF32;
        } else if (dtype == "f64") {
          config.dtype = tandem::DType::kF64;
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat("--dtype=", dtype, "; expected f32 or f64"));
        }
        const std::string amp = absl::GetFlag(FLAGS_amp);
        if (amp == "bf16") {
          config.amp = tandem::DType::kBF16;
        } else if (amp == "f16") {
          config.amp = tandem::DType::kF16;  // refused below, with the reason
        } else if (amp != "off") {
          return absl::InvalidArgumentError(
              absl::StrCat("--amp=", amp, "; expected off or bf16"));
        }
        const std::string kernels = absl::GetFlag(FLAGS_kernels);
        if (kernels != "fastest" && kernels != "pytorch") {
          return absl::InvalidArgumentError(absl::StrCat(
              "--kernels=", kernels, "; expected fastest or pytorch"));
        }
        // Process-wide, before any rank starts: every rank the same.
        tandem::cpu::SetKernelChoice(kernels == "pytorch"
                                         ? tandem::cpu::KernelChoice::kPyTorch
                                         : tandem::cpu::KernelChoice::kFastest);
        absl::StatusOr<tandem::train::checkpoint::CheckpointOptions>
            checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        config.checkpoint = *checkpoint;
        if (absl::Status s = tandem::train::CheckResnetConfig(config);
            !s.ok()) {
          return s;
        }
        return
            [config](tandem::comm::Communicator& comm, tandem::Device device) {
              return tandem::train::RunResnetDdp(comm, config, device).status();
            };
      });
}
