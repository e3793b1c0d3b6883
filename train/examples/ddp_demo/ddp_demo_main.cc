// //train:ddp_demo — the DDP tutorials' Conv2d script (ddp_demo.py), end to
// end: RandomDataset, Conv2d -> Linear -> Softmax, CrossEntropy, SGD with
// momentum, DDP, one "Step: N, Loss: X" line per step and
// "Epoch N Finished !" per epoch on rank 0.
//
//   ./bazelw run //train:ddp_demo -- --batchSize 64 --epochs 10
//   mpirun -np 2 bazel-bin/train/examples/ddp_demo --backend=mpi
//
// The script's flags, spelled as it spells them: --batchSize, --epochs,
// --dataset-size, --num-classes (absl names cannot hold '-': the dashed
// spellings are rewritten to --dataset_size / --num_classes before parsing,
// and both work), --gpu_id (sets CUDA_VISIBLE_DEVICES before any device is
// touched, as the script's os.environ line does; empty: left alone), plus
// --seed (the script seeds nothing; a run must be repeatable to compare).
// The common flags (--backend, --world_size, --timeout, --checkpoint_dir,
// --checkpoint_every) and the exit codes come from example_main.h.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "train/examples/ddp_demo/ddp_demo_lib.h"
#include "train/examples/runner/example_main.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::DdpDemoOptions, TANDEM_DDP_DEMO_OPTIONS)

namespace {

// "--dataset-size=5" -> "--dataset_size=5" (argparse's spelling).
std::string Underscored(const std::string& arg) {
  for (const char* dashed : {"dataset-size", "num-classes"}) {
    for (const char* prefix : {"--", "-"}) {
      const std::string name = std::string(prefix) + dashed;
      if (arg == name || arg.rfind(name + "=", 0) == 0) {
        std::string out = arg;
        const size_t dash = out.find('-', std::string(prefix).size());
        out[dash] = '_';
        return out;
      }
    }
  }
  return arg;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> rewritten;
  for (std::string& a : args) {
    a = Underscored(a);
    rewritten.push_back(a.data());
  }
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, rewritten.data(),
      {.name = "ddp_demo",
       .summary = "the DDP tutorial's Conv2d script: random 3x32x32 images, "
                  "Conv2d -> Linear -> Softmax, SGD with momentum."},
      []() -> absl::StatusOr<ExampleRank> {
        auto options = ExampleOptionsFromFlags();
        if (!options.ok()) return options.status();
        if (!options->gpu_id.empty()) {
          // Before the backend is resolved (no device touched yet).
          setenv("CUDA_VISIBLE_DEVICES", options->gpu_id.c_str(),
                 /*overwrite=*/1);
        }
        auto checkpoint = tandem::train::ExampleCheckpointOptions();
        if (!checkpoint.ok()) return checkpoint.status();
        const tandem::train::DdpDemoConfig config{*options, *checkpoint};
        return
            [config](tandem::comm::Communicator& comm, tandem::Device device) {
              return tandem::train::RunDdpDemo(comm, config, device);
            };
      });
}
