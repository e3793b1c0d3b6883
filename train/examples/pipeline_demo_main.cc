// //train:pipeline_demo — pipeline stages across ranks (GPipe or 1F1B),
// optionally replicated with DDP (stages x replicas), on any engine with
// sub-communicators (sim, mpi, gloo, nccl). See pipeline_demo_lib.h for the
// model and the output, docs/pipeline.md for the design.
//
//   ./bazelw run //train:pipeline_demo -- --world_size=4 --replicas=2
//   mpirun -np 2 bazel-bin/train/examples/pipeline_demo --backend=mpi
//   tandemrun --nproc_per_node=4 -- PIPELINE_DEMO --backend=gloo --replicas=2
//
// Flags: --schedule (gpipe | 1f1b), --chunks, --replicas, --steps,
// --batch_size, --hidden, --layers, --lr, --seed; the common flags and exit
// codes come from example_main.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "train/examples/example_main.h"
#include "train/examples/pipeline_demo_lib.h"

ABSL_FLAG(std::string, schedule, "1f1b", "Pipeline schedule: gpipe or 1f1b.");
ABSL_FLAG(int64_t, chunks, 4, "Micro-batches per replica's batch.");
ABSL_FLAG(int64_t, replicas, 1,
          "Data-parallel copies of the pipeline (DDP over each stage's "
          "replicas); the world size must be stages x replicas.");
ABSL_FLAG(int64_t, steps, 20, "Training steps.");
ABSL_FLAG(int64_t, batch_size, 32, "Global batch rows per step.");
ABSL_FLAG(int64_t, hidden, 32, "Width of the hidden layers.");
ABSL_FLAG(int64_t, layers, 4, "Linear layers, split over the stages.");
ABSL_FLAG(double, lr, 0.05, "Sgd learning rate.");
ABSL_FLAG(uint64_t, seed, 0, "Seed of the initial weights.");

int main(int argc, char** argv) {
  using tandem::train::ExampleRank;
  return tandem::train::ExampleMain(
      argc, argv,
      {.name = "pipeline_demo",
       .summary = "an MLP split into pipeline stages across ranks (GPipe or "
                  "1F1B), optionally replicated with DDP."},
      []() -> absl::StatusOr<ExampleRank> {
        tandem::train::PipelineDemoConfig config;
        absl::StatusOr<tandem::train::PipelineSchedule> schedule =
            tandem::train::ParsePipelineSchedule(absl::GetFlag(FLAGS_schedule));
        if (!schedule.ok()) return schedule.status();
        config.schedule = *schedule;
        config.chunks = absl::GetFlag(FLAGS_chunks);
        config.replicas = absl::GetFlag(FLAGS_replicas);
        config.steps = absl::GetFlag(FLAGS_steps);
        config.batch_size = absl::GetFlag(FLAGS_batch_size);
        config.hidden = absl::GetFlag(FLAGS_hidden);
        config.layers = absl::GetFlag(FLAGS_layers);
        config.lr = absl::GetFlag(FLAGS_lr);
        config.seed = absl::GetFlag(FLAGS_seed);
        if (absl::Status s = tandem::train::CheckPipelineDemoConfig(config);
            !s.ok()) {
          return s;
        }
        return
            [config](tandem::comm::Communicator& comm, tandem::Device device) {
              return tandem::train::RunPipelineDemo(comm, config, device);
            };
      });
}
