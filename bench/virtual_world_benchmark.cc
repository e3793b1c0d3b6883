// virtual_world_benchmark: what the virtual world costs a training step.
// Ordinary DDP at W ranks against --virtual_world=K at the same W and the
// same global batch (each rank's batch cut into its K/W virtual ranks'),
// through the training loop on the simulated cluster, for the large MLP
// (1024 -> 4096 -> 4096 -> 1024, 25 M parameters, 64 rows per rank) and a
// GPT (4 layers, 256 wide, 128-token blocks, 8 blocks per rank):
//
//   ./bazelw run -c opt //bench:virtual_world_benchmark
//   ./bazelw run -c opt //bench:virtual_world_benchmark -- --models=mlp
//       --runs=5 --virtual_world=8 --world_size=2
//
// Each run times the sides back to back (DDP, the invariant mode, then DDP
// with the rank's batch cut into K/W micro-batches: the invariant mode's
// small GEMMs without its ordered sums, to say where the time goes), each
// after its warm-up steps: the mean step time of rank 0, from
// StepView::seconds. One line per run and model:
//
//   virtual_world_step model=mlp run=1 ddp_ms=412.3 invariant_ms=530.9
//       ddp_accum_ms=480.2 ratio=0.777
//
// and, last, per model, the worst run (ratio = DDP's step time / the
// invariant mode's; bench/compare's claim invariant_step_vs_ddp takes the
// smaller of the two models'):
//
//   virtual_world_step model=mlp worst_ratio=0.777
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "comm/communicator.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/mlp.h"
#include "tensor/nn/models/gpt.h"
#include "tensor/tensor.h"
#include "train/loop/training_loop.h"

ABSL_FLAG(std::string, models, "mlp,gpt", "Comma-separated: mlp, gpt.");
ABSL_FLAG(int64_t, virtual_world, 8, "K, the virtual ranks.");
ABSL_FLAG(int64_t, world_size, 2, "W, the simulated ranks (must play K).");
ABSL_FLAG(int64_t, runs, 5, "Runs of both sides; the worst ratio counts.");
ABSL_FLAG(int64_t, steps, 6, "Timed steps per side and run.");
ABSL_FLAG(int64_t, warmup_steps, 2, "Untimed steps before them.");

namespace tandem {
namespace {

using train::Batch;

// The same batch every step: `rows` rows per (virtual) rank.
class FixedBatches : public train::EpochBatches {
 public:
  FixedBatches(std::vector<Batch> batches, int64_t steps)
      : batches_(std::move(batches)), steps_(steps) {}
  absl::StatusOr<int64_t> BeginEpoch(int64_t) override { return steps_; }
  absl::StatusOr<Batch> GetBatch(int64_t step) override {
    return GetReplicaBatch(step, 0);
  }
  int64_t replicas() const override {
    return static_cast<int64_t>(batches_.size());
  }
  absl::StatusOr<Batch> GetReplicaBatch(int64_t, int64_t v) override {
    return batches_[v];
  }

 private:
  std::vector<Batch> batches_;
  int64_t steps_;
};

struct Model {
  std::unique_ptr<nn::Module> module;
  train::LossFn loss;
  // A batch of `rows` rows (MLP samples or GPT blocks) from `gen`.
  std::function<absl::StatusOr<Batch>(int64_t rows, Generator& gen)> batch;
  int64_t rows_per_rank = 0;
};

constexpr int64_t kGptBlock = 128;

absl::StatusOr<Model> MakeModel(const std::string& name) {
  Generator gen(1);
  Model m;
  if (name == "mlp") {
    TANDEM_ASSIGN_OR_RETURN(m.module, nn::Mlp({1024, 4096, 4096, 1024}, gen));
    m.loss = train::CrossEntropyLoss();
    m.rows_per_rank = 64;
    m.batch = [](int64_t rows, Generator& g) -> absl::StatusOr<Batch> {
      std::vector<float> x(rows * 1024);
      g.Normal(x.data(), static_cast<int64_t>(x.size()), 0.f, 1.f);
      std::vector<int64_t> y(rows);
      for (int64_t i = 0; i < rows; ++i) y[i] = (i * 37) % 1024;
      TANDEM_ASSIGN_OR_RETURN(Tensor fx, Tensor::FromVector(x, {rows, 1024}));
      TANDEM_ASSIGN_OR_RETURN(Tensor fy, Tensor::FromVector(y));
      return Batch{.features = fx, .labels = fy};
    };
    return m;
  }
  if (name == "gpt") {
    nn::GptConfig config;
    config.vocab_size = 256;
    config.block_size = kGptBlock;
    config.n_layer = 4;
    config.n_head = 4;
    config.n_embd = 256;
    TANDEM_ASSIGN_OR_RETURN(m.module, nn::Gpt::Create(config, gen));
    m.loss = [](const Tensor& logits, const Tensor& y) {
      return nn::Gpt::Loss(logits, y);
    };
    m.rows_per_rank = 8;
    m.batch = [](int64_t rows, Generator& g) -> absl::StatusOr<Batch> {
      std::vector<int64_t> x(rows * kGptBlock);
      std::vector<int64_t> y(rows * kGptBlock);
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<int64_t>(g.Random() % 256);
        y[i] = static_cast<int64_t>(g.Random() % 256);
      }
      TANDEM_ASSIGN_OR_RETURN(Tensor fx,
                              Tensor::FromVector(x, {rows, kGptBlock}));
      TANDEM_ASSIGN_OR_RETURN(Tensor fy,
                              Tensor::FromVector(y, {rows, kGptBlock}));
      return Batch{.features = fx, .labels = fy};
    };
    return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--models: ", name, " is not a model; use mlp or gpt"));
}

// Rank 0's mean step time (seconds) of `steps` steps after `warmup`, at W
// ranks with K virtual ranks (0: ordinary DDP), the same global batch; with
// `accum` > 1 (and K = 0), DDP with the rank's batch cut into that many
// micro-batches (the virtual world's small GEMMs without its sums).
absl::StatusOr<double> StepSeconds(const std::string& name, int world,
                                   int64_t k, int64_t warmup, int64_t steps,
                                   int64_t accum = 1) {
  std::vector<double> seconds;
  sim::RunResult r =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(Model m, MakeModel(name));
        const int64_t local = k > 0 ? k / world : 1;
        Generator gen(100 + rank);
        std::vector<Batch> batches;
        for (int64_t v = 0; v < local; ++v) {
          TANDEM_ASSIGN_OR_RETURN(Batch b,
                                  m.batch(m.rows_per_rank / local, gen));
          batches.push_back(std::move(b));
        }
        FixedBatches data(std::move(batches), warmup + steps);
        // Field by field: GCC 12 -O2 warns falsely on designated initialisers
        // of a LoopOptions.
        train::LoopOptions options;
        options.who = "virtual_world_benchmark";
        options.epochs = 1;
        options.grad_accum = accum;
        options.virtual_world = k;
        TANDEM_ASSIGN_OR_RETURN(auto loop,
                                train::TrainingLoop::Create(
                                    comm, *m.module, train::ShardMode::kNone,
                                    train::SgdFactory(1e-4), options));
        train::LoopHooks hooks;
        hooks.after_step = [&](const train::StepView& s) {
          if (rank == 0 && s.first_on_rank && s.step >= warmup) {
            seconds.push_back(s.seconds);
          }
          return absl::OkStatus();
        };
        return loop->Run(data, m.loss, hooks);
      });
  TANDEM_RETURN_IF_ERROR(r.status());
  double sum = 0;
  for (double s : seconds) sum += s;
  return seconds.empty() ? 0.0 : sum / static_cast<double>(seconds.size());
}

absl::Status Main() {
  const int64_t k = absl::GetFlag(FLAGS_virtual_world);
  const int64_t world = absl::GetFlag(FLAGS_world_size);
  const int64_t runs = absl::GetFlag(FLAGS_runs);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t warmup = absl::GetFlag(FLAGS_warmup_steps);
  TANDEM_RETURN_IF_ERROR(bench::CheckInt("--virtual_world", k, 1, 1 << 20));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt("--world_size", world, 1, 64));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt("--runs", runs, 1, 1000));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt("--steps", steps, 1, 100000));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt("--warmup_steps", warmup, 0, 1000));
  TANDEM_RETURN_IF_ERROR(train::CheckVirtualWorld(k, world));
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_models), ',', absl::SkipEmpty())) {
    const std::string name(part);
    TANDEM_ASSIGN_OR_RETURN(Model m, MakeModel(name));  // the name's check
    if (m.rows_per_rank % (k / world) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, "'s ", m.rows_per_rank, " rows per rank do not split into ",
          k / world, " virtual ranks; use another --virtual_world"));
    }
    double worst = 0;
    for (int64_t run = 1; run <= runs; ++run) {
      TANDEM_ASSIGN_OR_RETURN(const double ddp,
                              StepSeconds(name, world, 0, warmup, steps));
      TANDEM_ASSIGN_OR_RETURN(const double inv,
                              StepSeconds(name, world, k, warmup, steps));
      TANDEM_ASSIGN_OR_RETURN(
          const double accum,
          StepSeconds(name, world, 0, warmup, steps, k / world));
      const double ratio = inv > 0 ? ddp / inv : 0;
      worst = run == 1 ? ratio : std::min(worst, ratio);
      std::printf(
          "virtual_world_step model=%s run=%ld ddp_ms=%.1f invariant_ms=%.1f "
          "ddp_accum_ms=%.1f ratio=%.3f\n",
          name.c_str(), static_cast<long>(run), ddp * 1e3, inv * 1e3,
          accum * 1e3, ratio);
      std::fflush(stdout);
    }
    std::printf("virtual_world_step model=%s worst_ratio=%.3f\n", name.c_str(),
                worst);
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "virtual_world_benchmark",
           .summary = "Times a training step of ordinary DDP against "
                      "--virtual_world=K at the same world size and global "
                      "batch (large MLP, GPT) on the simulated cluster.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  absl::Status s = Main();
  if (!s.ok()) {
    std::fprintf(stderr, "virtual_world_benchmark: %s\n", s.ToString().c_str());
    return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsageError
                                                          : kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("virtual_world_benchmark")) {
    return *code;
  }
  return tandem::base::FinishStdStreams("virtual_world_benchmark",
                                        tandem::Run(argc, argv));
}
