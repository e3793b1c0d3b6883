// //train:pipeline_demo — pipeline stages across ranks (GPipe or 1F1B),
// optionally replicated with DDP (stages x replicas), on any engine with
// sub-communicators (sim, mpi, gloo, nccl). See pipeline_demo_lib.h for the
// model and the output, docs/pipeline.md for the design.
//
//   ./bazelw run //train:pipeline_demo -- --world_size=4 --replicas=2
//   mpirun -np 2 bazel-bin/train/examples/pipeline_demo --backend=mpi
//   tandemrun --nproc_per_node=4 -- PIPELINE_DEMO --backend=gloo --replicas=2
//
// Its flags are pipeline_demo_lib.h's options; the common flags and exit
// codes come from example_main.h.
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "train/examples/pipeline_demo/pipeline_demo_lib.h"
#include "train/examples/runner/example_main.h"
#include "train/parallel/pipeline/pipeline.h"

TANDEM_EXAMPLE_FLAGS(tandem::train::PipelineDemoConfig,
                     TANDEM_PIPELINE_DEMO_OPTIONS)

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "pipeline_demo",
       .summary = "an MLP split into pipeline stages across ranks (GPipe or "
                  "1F1B), optionally replicated with DDP."},
      []() -> absl::StatusOr<ExampleRank> {
        auto config = ExampleOptionsFromFlags();
        if (!config.ok()) return config.status();
        if (absl::Status s =
                tandem::train::ParsePipelineSchedule(config->schedule).status();
            !s.ok()) {
          return s;
        }
        return [config = *config](tandem::comm::Communicator& comm,
                                  tandem::Device device) {
          return tandem::train::RunPipelineDemo(comm, config, device);
        };
      });
}
