// //train/examples:resnet_ddp (alias //train:resnet_ddp) — torchvision's
// ResNet trained with DDP on an image folder or on synthetic images.
//
//   ./bazelw run //train:resnet_ddp                      # 2 simulated ranks
//   ./bazelw run //train:resnet_ddp -- --data=/data/cifar10 --epochs=30
//       --lr_schedule=cosine --sync_bn --world_size=4     (one line)
//   mpirun -np 2 bazel-bin/train/examples/resnet_ddp --backend=mpi
//
// What it prints is described in train/examples/resnet_ddp/resnet_ddp_lib.h;
// where the images and the held-out split come from in
// train/data/datasets/image_splits.h. The common flags (backend, world size,
// checkpoints, trace, progress, metrics) and the exit codes come from
// train/examples/runner/example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "tensor/cpu/blas.h"
#include "train/examples/resnet_ddp/resnet_ddp_lib.h"
#include "train/examples/runner/example_main.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::ResnetOptions, TANDEM_RESNET_DDP_OPTIONS)

int main(int argc, char** argv) {
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
      tandem::train::ConfigSetup<tandem::train::ResnetConfig>(
          ExampleOptionsFromFlags,
          [](const tandem::train::ResnetConfig& config) -> absl::Status {
            if (absl::Status s = tandem::train::CheckResnetConfig(config);
                !s.ok()) {
              return s;
            }
            // Process-wide, before any rank starts: every rank the same.
            tandem::cpu::SetKernelChoice(
                config.kernels == "pytorch"
                    ? tandem::cpu::KernelChoice::kPyTorch
                    : tandem::cpu::KernelChoice::kFastest);
            return absl::OkStatus();
          },
          tandem::train::RunResnetDdp));
}
