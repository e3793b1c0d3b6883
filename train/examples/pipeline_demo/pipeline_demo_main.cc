// //train:pipeline_demo — pipeline stages across ranks (GPipe or 1F1B),
// optionally replicated with DDP (stages x replicas), on any engine with
// sub-communicators (sim, mpi, gloo, nccl). docs/pipeline.md: the design.
//
//   ./bazelw run //train:pipeline_demo -- --world_size=4 --replicas=2
//   mpirun -np 2 bazel-bin/train/examples/pipeline_demo --backend=mpi
//   tandemrun --nproc_per_node=4 -- PIPELINE_DEMO --backend=gloo --replicas=2
//
// What it runs and prints: pipeline_demo_lib.h. The common flags and the
// exit codes: train/examples/runner/example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "train/examples/pipeline_demo/pipeline_demo_lib.h"
#include "train/examples/runner/example_main.h"
#include "train/parallel/pipeline/pipeline.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::PipelineDemoConfig,
                     TANDEM_PIPELINE_DEMO_OPTIONS)

int main(int argc, char** argv) {
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "pipeline_demo",
       .summary = "an MLP split into pipeline stages across ranks (GPipe or "
                  "1F1B), optionally replicated with DDP."},
      tandem::train::ConfigSetup<tandem::train::PipelineDemoConfig>(
          ExampleOptionsFromFlags,
          [](const tandem::train::PipelineDemoConfig& config) {
            return tandem::train::ParsePipelineSchedule(config.schedule)
                .status();
          },
          tandem::train::RunPipelineDemo));
}
