// ddp_benchmark: training throughput of DistributedDataParallel on the CPU,
// against the same model trained without DDP and against the cblas_sgemm
// peak of this machine. The PyTorch peer is bench/peers/torch_ddp.py (same
// models, batches, optimizer and step); bench/compare runs both.
//
//   ./bazelw run -c opt //bench:ddp_benchmark                       # sim
//   ./bazelw run -c opt //bench:ddp_benchmark -- --models=large --world_sizes=2
//   mpirun --oversubscribe -np 2 bazel-bin/bench/ddp_benchmark --backend=mpi
//
// Models (f32, seeded like PyTorch, batch per rank):
//   small  MLP 64 -> 256 -> 256 -> 10 (ReLU between), batch 32
//   large  MLP 1024 -> 4096 -> 4096 -> 1024 (25 M parameters), batch 64
//   conv   the tutorials' Conv2d model: [3, 32, 32] -> Conv2d(3, 16, k3) ->
//          Flatten -> Linear(14400, 10) -> Softmax, batch 64
// One step, on every rank, on a fixed random batch of its own:
//   logits = ddp.Forward(x); loss = CrossEntropy(logits, y);
//   model.MarkGradsZero(); ddp.Backward(loss); sgd.Step()   (lr 0.01)
// which is the tutorials' loop (and torch_ddp.py's).
//
// Modes of a case:
//   ddp         DDP as shipped: buckets launched from the gradient hooks
//               during backward ("overlap on"), waited in FinishGradientSync.
//   ddp_nooverlap  "overlap off": DdpOptions::overlap = false, so every
//               bucket is launched in FinishGradientSync after backward
//               ended, in bucket order, and waited for. Same buckets, same
//               bytes, no communication issued before backward ends.
//   ddp_checked DDP as shipped, then what the examples do after each step:
//               loss.Item() and train::CheckStepFinite (one AllGather of 2
//               int64 per rank; every kParameterCheckInterval-th step also
//               a scan of every parameter for inf/nan). Use enough steps
//               (--target_seconds) for the scans to average out. Its step time
//               against ddp's is the check's cost; a `CHECK ... check_ms=
//               step_ms= check_percent=` line gives the time inside the check
//               within the same steps.
//   ddp_traced  DDP as shipped with the timeline recording (base/trace, as
//               --trace does on the examples): its step time against ddp's
//               is the cost of recording; ddp itself runs with recording
//               off, i.e. with every emit point reduced to one relaxed load.
//   local       the same model and step without DDP: no communication at
//               all, but the same number of ranks running at once, so they
//               compete for the same cores and memory (one core per rank at
//               world 2 on this 2-core machine).
//   ddp_bf16    DDP as shipped with forward and loss under bf16 autocast
//               (amp::Autocast(kCPU, kBF16)): bf16 GEMMs, f32 master
//               parameters, f32 gradients in the buckets. No GradScaler
//               (bf16 has f32's range; PyTorch's bf16 recipe uses none).
//               Its peer is bench/peers/torch_ddp.py's ddp_bf16 mode.
//
// Timing: warm-up steps, a one-step probe (max over ranks) that sets the
// step count for about --target_seconds of work, then --repeats segments of
// that many steps between barriers; step time = the slowest rank's elapsed /
// steps in the fastest segment (noise from other processes only ever slows a
// segment down); samples/s =
// world x batch / step time. GFLOP/s per rank counts the GEMM work of one
// step (forward, weight gradients, and input gradients of every layer but
// the first), divided by the step time.
//
// The GEMM peak (--gemm_peak): `--sweep_world` threads at once, each timing
// cblas_sgemm (row-major, 2048 x 2048 x 2048, one OpenBLAS thread per
// caller, like tandem's ranks); the per-thread GFLOP/s is the bound a rank
// can reach. It also times the large model's own GEMM shapes back to back
// (the shape-limited bound), once straight through cblas_sgemm and once the
// way tandem runs them: cpu::Gemm (A·B on oneDNN), and Linear's forward as
// the Linear op (which computes y^T = W x^T and transposes at these batch
// sizes; the output allocation and transpose are part of its time).
//
// Mixed precision (--amp_measure, the large model): the bf16 GEMM peak
// (cpu::GemmBf16 on 2048^3, one thread) and the large step's GEMM shapes
// through it (`GEMM kind=bf16_square|bf16_large_step` lines), and one step's
// memory in f32 and under bf16 autocast from the allocator's statistics
// (`MEMORY dtype=f32|bf16 activation_bytes= cast_bytes= step_peak_bytes=`;
// bench/amp_measure.h says what each counts).
//
// Output: a table per model for people, and one `RESULT key=value ...` line
// per case and `GEMM key=value ...` lines for bench/compare.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "base/trace/trace.h"
#include "bench/amp_measure.h"
#include "bench/flag_checks.h"
#include "bench/repeat_timer.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "sim/sim.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/conv2d.h"
#include "tensor/nn/layers/flatten.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/launch/builtin_engines.h"
#include "train/parallel/core/finite_check.h"
#include "train/parallel/ddp/ddp.h"

ABSL_FLAG(std::string, backend, "sim",
          "sim (ranks are threads of this process) or mpi (run under "
          "mpirun; the world size is mpirun's -np).");
ABSL_FLAG(std::string, world_sizes, "1,2,4", "Sim world sizes.");
ABSL_FLAG(std::string, models, "small,large,conv",
          "Comma-separated models: small, large, conv.");
ABSL_FLAG(std::string, modes, "ddp,local",
          "Modes timed at every world size: ddp, local, ddp_nooverlap, "
          "ddp_checked, ddp_traced, ddp_bf16.");
ABSL_FLAG(int, sweep_world, 2,
          "World size of the sweeps (overlap off, bucket caps); 0: none.");
ABSL_FLAG(std::string, sweep_models, "small,large,conv",
          "Models swept at --sweep_world.");
ABSL_FLAG(std::string, bucket_caps_mb, "1,5,25,100",
          "bucket_cap_bytes values of the sweep, MiB (the first bucket stays "
          "1 MiB, as in PyTorch).");
ABSL_FLAG(double, target_seconds, 2.0, "Timed work per case, seconds.");
ABSL_FLAG(int64_t, min_steps, 3, "At least this many timed steps per case.");
ABSL_FLAG(int64_t, max_steps, 2000, "At most this many timed steps per case.");
ABSL_FLAG(int64_t, warmup_steps, 2, "Untimed steps before each case.");
ABSL_FLAG(int64_t, repeats, 1,
          "Timed segments of `steps` steps per case; the fastest is reported.");
ABSL_FLAG(bool, gemm_peak, true, "Measure the cblas_sgemm peak first.");
ABSL_FLAG(bool, amp_measure, false,
          "Measure the bf16 GEMM peak, the large step's bf16 GEMMs and one "
          "large step's memory in f32 and bf16 first (sim backend).");

namespace tandem {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

double Now() { return bench::SteadySeconds(); }

// ---------------------------------------------------------------- models ---

// One GEMM of a step as tandem issues it: C[m,n] = op(A) op(B) + beta C.
struct GemmShape {
  int64_t m, n, k;
  int64_t times = 1;  // per step
  bool ta = false, tb = false;
  float beta = 0;
  // Linear's forward x W^T (m = batch, n = out, k = in): timed as tandem's
  // Linear op, which picks its own layout (ops/matmul.cc).
  bool linear_forward = false;
};

struct ModelSpec {
  std::string name;
  std::string description;
  int64_t batch = 0;
  std::vector<int64_t> sample_shape;  // input without the batch dim
  int64_t classes = 0;
  std::function<absl::StatusOr<std::unique_ptr<nn::Sequential>>(Generator&)>
      build;
  std::vector<GemmShape> gemms;  // one step's GEMMs, one rank

  double FlopsPerStep() const {
    double f = 0;
    for (const GemmShape& g : gemms) f += 2.0 * g.m * g.n * g.k * g.times;
    return f;
  }
};

// As tensor/ops/matmul.cc's Linear: forward x W^T, dW += dY^T x (into the
// zeroed gradient, beta 1), and dX = dY W unless it is the first layer.
void AddLinearGemms(int64_t batch, int64_t in, int64_t out, bool first,
                    std::vector<GemmShape>& gemms) {
  gemms.push_back(
      {batch, out, in, 1, false, true, 0.f, /*linear_forward=*/true});
  gemms.push_back({out, in, batch, 1, true, false, 1.f});
  if (!first) gemms.push_back({batch, in, out, 1, false, false, 0.f});
}

ModelSpec Mlp(std::string name, std::vector<int64_t> widths, int64_t batch) {
  ModelSpec spec;
  spec.name = std::move(name);
  spec.description = absl::StrCat("MLP ", absl::StrJoin(widths, "-"));
  spec.batch = batch;
  spec.sample_shape = {widths.front()};
  spec.classes = widths.back();
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    AddLinearGemms(batch, widths[i], widths[i + 1], i == 0, spec.gemms);
  }
  spec.build =
      [widths](
          Generator& gen) -> absl::StatusOr<std::unique_ptr<nn::Sequential>> {
    auto model = std::make_unique<nn::Sequential>();
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      if (i > 0) {
        TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
      }
      TANDEM_RETURN_IF_ERROR(
          model->Append(nn::Linear::Create(widths[i], widths[i + 1], gen)));
    }
    return model;
  };
  return spec;
}

ModelSpec ConvModel() {
  ModelSpec spec;
  spec.name = "conv";
  spec.description = "Conv2d 3-16 k3 + Linear 14400-10 + Softmax";
  spec.batch = 64;
  spec.sample_shape = {3, 32, 32};
  spec.classes = 10;
  // im2col GEMM per sample: [16, 27] x [27, 900]; forward and dW.
  spec.gemms.push_back({16, 900, 27, spec.batch, false, false, 1.f});
  spec.gemms.push_back({16, 27, 900, spec.batch, false, true, 1.f});
  AddLinearGemms(spec.batch, 16 * 30 * 30, 10, /*first=*/false, spec.gemms);
  spec.build =
      [](Generator& gen) -> absl::StatusOr<std::unique_ptr<nn::Sequential>> {
    auto model = std::make_unique<nn::Sequential>();
    TANDEM_RETURN_IF_ERROR(model->Append(nn::Conv2d::Create(
        /*in_channels=*/3, /*out_channels=*/16, /*kernel_size=*/3,
        /*stride=*/1, /*padding=*/0, gen)));
    TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::Flatten>()));
    TANDEM_RETURN_IF_ERROR(
        model->Append(nn::Linear::Create(16 * 30 * 30, 10, gen)));
    TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::Softmax>(1)));
    return model;
  };
  return spec;
}

const std::vector<ModelSpec>& AllModels() {
  static const auto* models = new std::vector<ModelSpec>{
      Mlp("small", {64, 256, 256, 10}, 32),
      Mlp("large", {1024, 4096, 4096, 1024}, 64),
      ConvModel(),
  };
  return *models;
}

// ----------------------------------------------------------------- cases ---

enum class Mode {
  kDdp,
  kDdpNoOverlap,
  kDdpChecked,
  kDdpTraced,
  kLocal,
  kDdpBf16
};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kDdp:
      return "ddp";
    case Mode::kDdpNoOverlap:
      return "ddp_nooverlap";
    case Mode::kDdpChecked:
      return "ddp_checked";
    case Mode::kDdpTraced:
      return "ddp_traced";
    case Mode::kLocal:
      return "local";
    case Mode::kDdpBf16:
      return "ddp_bf16";
  }
  return "?";
}

struct Case {
  const ModelSpec* model = nullptr;
  int world = 1;
  Mode mode = Mode::kDdp;
  int64_t bucket_cap_bytes = 25 * kMiB;
};

struct CaseResult {
  double step_seconds = 0;
  int64_t steps = 0;
  double loss = 0;  // rank 0's last loss
  // ddp_checked: the slowest rank's time per step inside the finite check
  // (measured within the same steps as step_seconds, so load on the machine
  // slows both alike).
  double check_seconds = 0;
  // The same on the rank that spent least in it: the one the others wait
  // for in the check's AllGather, so its time is the check's own work
  // (the others' extra is waiting they would otherwise do in the next
  // step's all-reduce).
  double check_seconds_min = 0;
};

absl::Status MaxOverRanks(comm::Communicator& comm, double& v) {
  return comm
      .AllReduce(comm::HostView(&v, 1, comm::DType::kF64), comm::ReduceOp::kMax)
      ->Wait();
}

absl::StatusOr<CaseResult> RunCase(comm::Communicator& comm, const Case& c) {
  const ModelSpec& spec = *c.model;
  // ddp_traced: every rank records from before its first step (the recorder
  // is process-wide; Start() and Stop() are idempotent) until it leaves the
  // case, after the last timed segment's collective, so no rank still times
  // when another stops; the events are then dropped.
  if (c.mode == Mode::kDdpTraced) trace::Start();
  struct StopTrace {
    bool on;
    ~StopTrace() {
      if (!on) return;
      trace::Stop();
      trace::Clear();
    }
  } stop_trace{c.mode == Mode::kDdpTraced};
  Generator gen(1234);  // the same initial weights on every rank
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                          spec.build(gen));

  // This rank's fixed batch.
  Generator data_gen(1000 + comm.rank());
  Shape shape = {spec.batch};
  shape.insert(shape.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Empty(shape));
  data_gen.Normal(x.data<float>(), x.numel(), 0.f, 1.f);
  std::vector<int64_t> labels(spec.batch);
  for (int64_t& l : labels) l = data_gen.Random() % spec.classes;
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));

  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(model->Parameters(), 0.01));
  std::unique_ptr<train::DistributedDataParallel> ddp;
  if (c.mode != Mode::kLocal) {
    train::DdpOptions options;
    options.bucket_cap_bytes = c.bucket_cap_bytes;
    options.overlap = c.mode != Mode::kDdpNoOverlap;
    TANDEM_ASSIGN_OR_RETURN(
        ddp, train::DistributedDataParallel::Create(*model, comm, options));
  }

  Tensor loss;
  double check_seconds = 0;  // time inside the ddp_checked check, this rank
  int64_t checked_steps = 0;
  auto step = [&]() -> absl::Status {
    {
      // Off (enabled = false) except in ddp_bf16: the region costs nothing.
      amp::Autocast autocast(DeviceType::kCPU, DType::kBF16,
                             c.mode == Mode::kDdpBf16);
      Tensor logits;
      if (ddp != nullptr) {
        TANDEM_ASSIGN_OR_RETURN(logits, ddp->Forward(x));
      } else {
        TANDEM_ASSIGN_OR_RETURN(logits, model->Forward(x));
      }
      TANDEM_ASSIGN_OR_RETURN(loss, CrossEntropy(logits, y));
    }
    // Marked, not filled: the backward's first write overwrites (what
    // train::Strategy does for local and DDP steps).
    model->MarkGradsZero();
    if (ddp != nullptr) {
      TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
    } else {
      TANDEM_RETURN_IF_ERROR(loss.Backward());
    }
    TANDEM_RETURN_IF_ERROR(sgd.Step());
    if (c.mode != Mode::kDdpChecked) return absl::OkStatus();
    const double check_start = Now();
    TANDEM_ASSIGN_OR_RETURN(double value, loss.Item());
    // As the examples do: the loss every step, the parameters every
    // kParameterCheckInterval steps (no epochs here).
    TANDEM_RETURN_IF_ERROR(
        train::CheckStepFinite(
            comm, *model,
            {.loss = value,
             .check_parameters = train::ParameterCheckDue(
                 checked_steps++, std::numeric_limits<int64_t>::max())})
            .status());
    check_seconds += Now() - check_start;
    return absl::OkStatus();
  };

  for (int64_t i = 0; i < absl::GetFlag(FLAGS_warmup_steps); ++i) {
    TANDEM_RETURN_IF_ERROR(step());
  }
  TANDEM_RETURN_IF_ERROR(comm.Barrier());
  double probe = Now();
  TANDEM_RETURN_IF_ERROR(step());
  probe = Now() - probe;
  TANDEM_RETURN_IF_ERROR(MaxOverRanks(comm, probe));
  const int64_t steps = static_cast<int64_t>(std::clamp<double>(
      absl::GetFlag(FLAGS_target_seconds) / std::max(probe, 1e-9),
      static_cast<double>(absl::GetFlag(FLAGS_min_steps)),
      static_cast<double>(absl::GetFlag(FLAGS_max_steps))));

  // The best of --repeats timed segments: other processes on a small shared
  // machine only ever make a segment slower.
  double best = 0;
  double best_check = 0;      // the check's share of the best segment
  double best_check_min = 0;  // the same on the rank that spent least
  for (int64_t r = 0; r < std::max<int64_t>(1, absl::GetFlag(FLAGS_repeats));
       ++r) {
    TANDEM_RETURN_IF_ERROR(comm.Barrier());
    check_seconds = 0;
    const double start = Now();
    for (int64_t i = 0; i < steps; ++i) TANDEM_RETURN_IF_ERROR(step());
    double elapsed = Now() - start;
    double checked = check_seconds;
    double checked_min = check_seconds;
    TANDEM_RETURN_IF_ERROR(MaxOverRanks(comm, elapsed));
    TANDEM_RETURN_IF_ERROR(MaxOverRanks(comm, checked));
    TANDEM_RETURN_IF_ERROR(
        comm.AllReduce(comm::HostView(&checked_min, 1, comm::DType::kF64),
                       comm::ReduceOp::kMin)
            ->Wait());
    if (r == 0 || elapsed < best) {
      best = elapsed;
      best_check = checked;
      best_check_min = checked_min;
    }
  }
  CaseResult result;
  result.steps = steps;
  result.step_seconds = best / static_cast<double>(steps);
  result.check_seconds = best_check / static_cast<double>(steps);
  result.check_seconds_min = best_check_min / static_cast<double>(steps);
  TANDEM_ASSIGN_OR_RETURN(result.loss, loss.Item());
  return result;
}

// ------------------------------------------------------------------ GEMM ---

// Which library runs TimeGemms' multiplications.
enum class GemmPath { kOpenBlas, kTandem };

// GFLOP/s of one thread running `shapes` back to back for ~`seconds`:
// straight cblas_sgemm, or tandem's cpu::Gemm (which sends A·B to oneDNN).
double TimeGemms(const std::vector<GemmShape>& shapes, double seconds,
                 GemmPath path = GemmPath::kOpenBlas) {
  int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const GemmShape& g : shapes) {
    max_a = std::max(max_a, g.m * g.k);
    max_b = std::max(max_b, g.k * g.n);
    max_c = std::max(max_c, g.m * g.n);
  }
  std::vector<float> a(max_a, 0.5f), b(max_b, 0.25f), c(max_c, 0.f);
  // Linear's forward through tandem is the Linear op itself (x [m, k],
  // W [n, k]), whatever layout it picks; made once, outside the timing.
  NoGradGuard no_grad;
  std::vector<std::pair<Tensor, Tensor>> linear_inputs(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& g = shapes[i];
    if (path != GemmPath::kTandem || !g.linear_forward) continue;
    linear_inputs[i] = {Tensor::Full({g.m, g.k}, 0.5).value(),
                        Tensor::Full({g.n, g.k}, 0.25).value()};
  }
  double flops = 0;
  auto once = [&] {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const GemmShape& g = shapes[i];
      // Row-major leading dimensions of op(A) [m,k] and op(B) [k,n].
      const int lda = static_cast<int>(g.ta ? g.m : g.k);
      const int ldb = static_cast<int>(g.tb ? g.k : g.n);
      for (int64_t t = 0; t < g.times; ++t) {
        if (path == GemmPath::kTandem) {
          // As tandem runs it (valid shapes by construction).
          if (g.linear_forward) {
            Linear(linear_inputs[i].first, linear_inputs[i].second, Tensor())
                .IgnoreError();
          } else {
            cpu::Gemm<float>(g.ta, g.tb, g.m, g.n, g.k, 1.f, a.data(), b.data(),
                             g.beta, c.data())
                .IgnoreError();
          }
          continue;
        }
        cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans,
                    g.tb ? CblasTrans : CblasNoTrans, static_cast<int>(g.m),
                    static_cast<int>(g.n), static_cast<int>(g.k), 1.f, a.data(),
                    lda, b.data(), ldb, g.beta, c.data(),
                    static_cast<int>(g.n));
      }
    }
  };
  for (const GemmShape& g : shapes) flops += 2.0 * g.m * g.n * g.k * g.times;
  return flops * bench::RepeatsPerSecond(once, seconds) / 1e9;
}

// Mean per-thread GFLOP/s of `threads` threads timing `shapes` at once.
double ConcurrentGemm(int threads, const std::vector<GemmShape>& shapes,
                      double seconds, GemmPath path = GemmPath::kOpenBlas) {
  std::vector<double> rates(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { rates[t] = TimeGemms(shapes, seconds, path); });
  }
  for (std::thread& th : pool) th.join();
  double sum = 0;
  for (double r : rates) sum += r;
  return sum / threads;
}

void GemmPeak(int threads) {
  const std::vector<GemmShape> square = {{2048, 2048, 2048, 1}};
  const ModelSpec* large = nullptr;
  for (const ModelSpec& m : AllModels()) {
    if (m.name == "large") large = &m;
  }
  std::printf(
      "\n# cblas_sgemm peak: OpenBLAS, one thread per caller, f32, row-major\n"
      "# %-26s %8s  %14s\n",
      "shape", "threads", "GFLOP/s/thread");
  for (int n : {1, threads}) {
    const double peak = ConcurrentGemm(n, square, 1.0);
    std::printf("  %-26s %8d  %14.1f\n", "2048x2048x2048", n, peak);
    std::printf("GEMM kind=square threads=%d gflops_per_thread=%.3f\n", n,
                peak);
    const double shaped = ConcurrentGemm(n, large->gemms, 1.0);
    std::printf("  %-26s %8d  %14.1f\n", "large MLP step's GEMMs", n, shaped);
    std::printf("GEMM kind=large_step threads=%d gflops_per_thread=%.3f\n", n,
                shaped);
    const double dispatched =
        ConcurrentGemm(n, large->gemms, 1.0, GemmPath::kTandem);
    std::printf("  %-26s %8d  %14.1f\n", "  the same, as tandem runs", n,
                dispatched);
    std::printf(
        "GEMM kind=large_step_tandem threads=%d gflops_per_thread=%.3f\n", n,
        dispatched);
    if (threads == 1) break;
  }
  std::fflush(stdout);
}

// --------------------------------------------------------------- bf16 ---

// The bf16 GEMM peak and the large step's GEMMs through cpu::GemmBf16 (one
// thread), then one large step's memory in f32 and bf16 (one thread, no
// DDP: activations do not depend on it).
absl::Status AmpMeasure() {
  const ModelSpec* large = nullptr;
  for (const ModelSpec& m : AllModels()) {
    if (m.name == "large") large = &m;
  }
  std::printf("\n# bf16 GEMM through cpu::GemmBf16 (%s), one thread\n",
              cpu::HasNativeBf16Gemm() ? "oneDNN bf16 matmul"
                                       : "f32 fallback: no bf16 kernel here");
  const double square =
      bench::TimeBf16Gemms({{.shape = {.m = 2048, .n = 2048, .k = 2048}}}, 1.0);
  std::vector<bench::Bf16Gemm> step;
  for (const GemmShape& g : large->gemms) {
    step.push_back({.shape = {.transpose_a = g.ta,
                              .transpose_b = g.tb,
                              .m = g.m,
                              .n = g.n,
                              .k = g.k,
                              .accumulate = g.beta != 0},
                    .times = g.times});
  }
  const double shaped = bench::TimeBf16Gemms(step, 1.0);
  std::printf("  %-26s %14.1f GFLOP/s\n", "2048x2048x2048", square);
  std::printf("  %-26s %14.1f GFLOP/s\n", "large MLP step's GEMMs", shaped);
  std::printf("GEMM kind=bf16_square threads=1 gflops_per_thread=%.3f\n",
              square);
  std::printf("GEMM kind=bf16_large_step threads=1 gflops_per_thread=%.3f\n",
              shaped);
  std::printf(
      "\n# large step memory (allocator statistics, one rank, no DDP)\n"
      "# %-5s %16s %16s %16s\n",
      "dtype", "activation B", "param casts B", "step peak B");
  for (bool bf16 : {false, true}) {
    Generator gen(1234);
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model,
                            large->build(gen));
    Generator data_gen(1000);
    TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Empty({large->batch, 1024}));
    data_gen.Normal(x.data<float>(), x.numel(), 0.f, 1.f);
    std::vector<int64_t> labels(large->batch);
    for (int64_t& l : labels) l = data_gen.Random() % large->classes;
    TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
    TANDEM_ASSIGN_OR_RETURN(bench::StepMemory m,
                            bench::MeasureStepMemory(*model, x, y, bf16));
    const char* name = bf16 ? "bf16" : "f32";
    std::printf("  %-5s %16lld %16lld %16lld\n", name,
                static_cast<long long>(m.activation_bytes),
                static_cast<long long>(m.cast_bytes),
                static_cast<long long>(m.step_peak_bytes));
    std::printf(
        "MEMORY model=large dtype=%s activation_bytes=%lld cast_bytes=%lld "
        "step_peak_bytes=%lld\n",
        name, static_cast<long long>(m.activation_bytes),
        static_cast<long long>(m.cast_bytes),
        static_cast<long long>(m.step_peak_bytes));
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- driver ---

absl::StatusOr<std::vector<std::string>> SplitList(const std::string& flag,
                                                   const char* what) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", what, " is empty"));
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> SplitInts(const std::string& flag,
                                               const char* what) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> parts,
                          SplitList(flag, what));
  std::vector<int64_t> out;
  for (const std::string& p : parts) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(p, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", what, ": expected positive integers, found '", p, "'"));
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<const ModelSpec*> FindModel(const std::string& name) {
  for (const ModelSpec& m : AllModels()) {
    if (m.name == name) return &m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown model '", name, "'; expected small, large or conv"));
}

absl::StatusOr<Mode> ParseMode(const std::string& name) {
  for (Mode m : {Mode::kDdp, Mode::kDdpNoOverlap, Mode::kDdpChecked,
                 Mode::kDdpTraced, Mode::kLocal, Mode::kDdpBf16}) {
    if (name == ModeName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", name,
                   "'; expected ddp, ddp_nooverlap, ddp_checked, ddp_traced, "
                   "local or ddp_bf16"));
}

// The cases of one model, in print order.
absl::StatusOr<std::vector<Case>> CasesFor(const ModelSpec& model,
                                           const std::vector<int64_t>& worlds,
                                           bool swept) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> mode_names,
                          SplitList(absl::GetFlag(FLAGS_modes), "modes"));
  std::vector<Mode> modes;
  for (const std::string& m : mode_names) {
    TANDEM_ASSIGN_OR_RETURN(Mode mode, ParseMode(m));
    modes.push_back(mode);
  }
  std::vector<Case> cases;
  auto add = [&](int world, Mode mode, int64_t cap) {
    for (const Case& c : cases) {
      if (c.world == world && c.mode == mode &&
          (mode == Mode::kLocal || c.bucket_cap_bytes == cap)) {
        return;
      }
    }
    cases.push_back({&model, world, mode, cap});
  };
  for (int64_t w : worlds) {
    for (Mode m : modes) add(static_cast<int>(w), m, 25 * kMiB);
  }
  const int sweep = absl::GetFlag(FLAGS_sweep_world);
  if (swept && sweep > 0 &&
      std::find(worlds.begin(), worlds.end(), sweep) != worlds.end()) {
    add(sweep, Mode::kLocal, 25 * kMiB);
    add(sweep, Mode::kDdp, 25 * kMiB);
    add(sweep, Mode::kDdpNoOverlap, 25 * kMiB);
    TANDEM_ASSIGN_OR_RETURN(
        std::vector<int64_t> caps,
        SplitInts(absl::GetFlag(FLAGS_bucket_caps_mb), "bucket_caps_mb"));
    for (int64_t mb : caps) add(sweep, Mode::kDdp, mb * kMiB);
  }
  return cases;
}

void PrintModelHeader(const ModelSpec& m, const std::string& backend) {
  std::printf(
      "\n# %s (%s), batch %lld per rank, %.3f GFLOP per step per rank; "
      "backend %s\n",
      m.name.c_str(), m.description.c_str(), static_cast<long long>(m.batch),
      m.FlopsPerStep() / 1e9, backend.c_str());
  std::printf("# %5s  %-14s %7s | %10s  %11s  %12s  %6s  %10s\n", "world",
              "mode", "bucket", "step (ms)", "samples/s", "GFLOP/s/rank",
              "steps", "loss");
  std::fflush(stdout);
}

void PrintRow(const Case& c, const CaseResult& r, const std::string& backend) {
  const ModelSpec& m = *c.model;
  const double samples = c.world * m.batch / r.step_seconds;
  const double gflops = m.FlopsPerStep() / r.step_seconds / 1e9;
  const std::string bucket = c.mode == Mode::kLocal
                                 ? "-"
                                 : absl::StrCat(c.bucket_cap_bytes / kMiB, "M");
  std::printf("  %5d  %-14s %7s | %10.3f  %11.1f  %12.2f  %6lld  %10.4f\n",
              c.world, ModeName(c.mode), bucket.c_str(), r.step_seconds * 1e3,
              samples, gflops, static_cast<long long>(r.steps), r.loss);
  std::printf(
      "RESULT backend=%s model=%s world=%d mode=%s bucket_mb=%lld "
      "step_ms=%.6f samples_per_s=%.3f gflops_per_rank=%.4f steps=%lld\n",
      backend.c_str(), m.name.c_str(), c.world, ModeName(c.mode),
      static_cast<long long>(
          c.mode == Mode::kLocal ? 0 : c.bucket_cap_bytes / kMiB),
      r.step_seconds * 1e3, samples, gflops, static_cast<long long>(r.steps));
  if (c.mode == Mode::kDdpChecked) {
    std::printf(
        "CHECK backend=%s model=%s world=%d check_ms=%.4f step_ms=%.4f "
        "check_percent=%.3f check_ms_min_rank=%.4f "
        "check_percent_min_rank=%.3f\n",
        backend.c_str(), m.name.c_str(), c.world, r.check_seconds * 1e3,
        r.step_seconds * 1e3, 100 * r.check_seconds / r.step_seconds,
        r.check_seconds_min * 1e3, 100 * r.check_seconds_min / r.step_seconds);
  }
  std::fflush(stdout);
}

absl::Status RunSim() {
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<int64_t> worlds,
      SplitInts(absl::GetFlag(FLAGS_world_sizes), "world_sizes"));
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> names,
                          SplitList(absl::GetFlag(FLAGS_models), "models"));
  const std::string sweep_models =
      absl::StrCat(",", absl::GetFlag(FLAGS_sweep_models), ",");
  std::printf(
      "# tandem ddp_benchmark: sim backend (ranks are threads), %u hardware "
      "threads, OpenBLAS one thread per rank\n",
      std::thread::hardware_concurrency());
  if (absl::GetFlag(FLAGS_gemm_peak)) {
    GemmPeak(std::max(1, absl::GetFlag(FLAGS_sweep_world)));
  }
  if (absl::GetFlag(FLAGS_amp_measure)) TANDEM_RETURN_IF_ERROR(AmpMeasure());
  for (const std::string& name : names) {
    TANDEM_ASSIGN_OR_RETURN(const ModelSpec* model, FindModel(name));
    const bool swept =
        sweep_models.find(absl::StrCat(",", name, ",")) != std::string::npos;
    TANDEM_ASSIGN_OR_RETURN(std::vector<Case> cases,
                            CasesFor(*model, worlds, swept));
    PrintModelHeader(*model, "sim");
    for (const Case& c : cases) {
      CaseResult result;
      TANDEM_RETURN_IF_ERROR(train::BuiltinEngines().Run(
          {"sim", c.world}, {}, [&](comm::Communicator& comm) -> absl::Status {
            TANDEM_ASSIGN_OR_RETURN(CaseResult r, RunCase(comm, c));
            if (comm.rank() == 0) result = r;
            return absl::OkStatus();
          }));
      PrintRow(c, result, "sim");
    }
  }
  return absl::OkStatus();
}

absl::Status RunMpi(comm::Communicator& comm) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<std::string> names,
                          SplitList(absl::GetFlag(FLAGS_models), "models"));
  const std::string sweep_models =
      absl::StrCat(",", absl::GetFlag(FLAGS_sweep_models), ",");
  const bool root = comm.rank() == 0;
  if (root) {
    std::printf(
        "# tandem ddp_benchmark: mpi backend, %d processes, OpenBLAS one "
        "thread per rank\n",
        comm.size());
  }
  for (const std::string& name : names) {
    TANDEM_ASSIGN_OR_RETURN(const ModelSpec* model, FindModel(name));
    const bool swept =
        sweep_models.find(absl::StrCat(",", name, ",")) != std::string::npos;
    TANDEM_ASSIGN_OR_RETURN(std::vector<Case> cases,
                            CasesFor(*model, {comm.size()}, swept));
    if (root) PrintModelHeader(*model, "mpi");
    for (const Case& c : cases) {
      TANDEM_ASSIGN_OR_RETURN(CaseResult r, RunCase(comm, c));
      if (root) PrintRow(c, r, "mpi");
    }
  }
  return absl::OkStatus();
}

// The numeric flags, before anything runs (a usage error names the flag):
// every one bounded, so that no value loops for ever or overflows.
absl::Status CheckFlags() {
  constexpr int64_t kMaxSteps = 1000000;
  const int64_t min_steps = absl::GetFlag(FLAGS_min_steps);
  TANDEM_RETURN_IF_ERROR(bench::CheckSeconds(
      "--target_seconds", absl::GetFlag(FLAGS_target_seconds)));
  TANDEM_RETURN_IF_ERROR(
      bench::CheckInt("--min_steps", min_steps, 1, kMaxSteps));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt(
      "--max_steps", absl::GetFlag(FLAGS_max_steps), min_steps, kMaxSteps));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt(
      "--warmup_steps", absl::GetFlag(FLAGS_warmup_steps), 0, kMaxSteps));
  TANDEM_RETURN_IF_ERROR(
      bench::CheckInt("--repeats", absl::GetFlag(FLAGS_repeats), 1, 1000));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt("--sweep_world",
                                         absl::GetFlag(FLAGS_sweep_world), 0,
                                         sim::kMaxWorldSize));
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<int64_t> worlds,
      SplitInts(absl::GetFlag(FLAGS_world_sizes), "world_sizes"));
  for (int64_t w : worlds) {
    TANDEM_RETURN_IF_ERROR(
        bench::CheckInt("--world_sizes entry", w, 1, sim::kMaxWorldSize));
  }
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<int64_t> caps,
      SplitInts(absl::GetFlag(FLAGS_bucket_caps_mb), "bucket_caps_mb"));
  for (int64_t mb : caps) {
    TANDEM_RETURN_IF_ERROR(
        bench::CheckInt("--bucket_caps_mb entry", mb, 1, int64_t{1} << 20));
  }
  return absl::OkStatus();
}

int Main() {
  if (absl::Status s = CheckFlags(); !s.ok()) {
    std::fprintf(stderr, "ddp_benchmark: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  // One OpenBLAS thread per rank (tandem's default, made explicit).
  if (absl::Status s = cpu::SetBlasNumThreads(1); !s.ok()) {
    std::fprintf(stderr, "ddp_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "sim" && backend != "mpi") {
    std::fprintf(stderr,
                 "ddp_benchmark: --backend must be sim or mpi, found '%s'\n",
                 backend.c_str());
    return 2;
  }
  // Through the launch registry: sim inside an MPI job, or mpi with the
  // wrong launcher, is a usage error that says what to run instead.
  const train::LaunchRegistry registry = train::BuiltinEngines();
  absl::StatusOr<train::LaunchContext> here = train::DetectLaunchContext();
  absl::StatusOr<train::ResolvedBackend> resolved =
      here.ok() ? registry.Resolve({backend, backend == "sim" ? 1 : 0}, *here)
                : absl::StatusOr<train::ResolvedBackend>(here.status());
  if (!resolved.ok()) {
    std::fprintf(stderr, "ddp_benchmark: %s\n",
                 std::string(resolved.status().message()).c_str());
    return 2;
  }
  // On mpi, a failing rank prints its error and ends the job (the engine's
  // on_rank_error); the others never get here.
  const absl::Status s =
      backend == "sim" ? RunSim() : registry.Run(*resolved, {}, RunMpi);
  if (!s.ok()) {
    std::fprintf(stderr, "ddp_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tandem

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "ddp_benchmark",
           .summary = "Times DistributedDataParallel training steps (sim or "
                      "mpi backend) against local training and the "
                      "cblas_sgemm peak.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  return tandem::Main();
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("ddp_benchmark")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("ddp_benchmark", Run(argc, argv));
}
