// //train:ddp_demo — the DDP tutorials' Conv2d script (ddp_demo.py), end to
// end, its flags spelled as the script spells them (--batchSize,
// --dataset-size).
//
//   ./bazelw run //train:ddp_demo -- --batchSize 64 --epochs 10
//   mpirun -np 2 bazel-bin/train/examples/ddp_demo --backend=mpi
//
// What it runs and prints: ddp_demo_lib.h. The common flags and the exit
// codes: train/examples/runner/example_main.h.
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "train/examples/ddp_demo/ddp_demo_lib.h"
#include "train/examples/runner/example_main.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::DdpDemoOptions, TANDEM_DDP_DEMO_OPTIONS)

int main(int argc, char** argv) {
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "ddp_demo",
       .summary = "the DDP tutorial's Conv2d script: random 3x32x32 images, "
                  "Conv2d -> Linear -> Softmax, SGD with momentum.",
       .dashed = {"dataset_size", "num_classes"}},
      tandem::train::ConfigSetup<tandem::train::DdpDemoConfig>(
          ExampleOptionsFromFlags,
          // --gpu_id, as the script's os.environ line: before the backend
          // is resolved (no device touched yet).
          [](const tandem::train::DdpDemoConfig& config) {
            if (!config.gpu_id.empty()) {
              setenv("CUDA_VISIBLE_DEVICES", config.gpu_id.c_str(),
                     /*overwrite=*/1);
            }
            return absl::OkStatus();
          },
          tandem::train::RunDdpDemo));
}
