// Tensor-library throughput: GEMM, conv2d, Linear forward+backward and one
// MLP training step, each next to raw OpenBLAS on the same shapes in the
// same run, reported as GFLOP/s.
//
//   ./bazelw run -c opt //bench:tensor_benchmark
//   ./bazelw run -c opt //bench:tensor_benchmark -- --blas_threads=2
//       --benchmark_filter=Linear   (one line)
//
// --blas_threads=N (default 1, what each simulated rank uses) sets
// OpenBLAS's thread count for tandem and the raw cblas_sgemm baseline alike.
// Every other flag goes to Google Benchmark.
//
// The key figure is BM_Linear1024x4096_TandemVsBlas: nn::Linear(1024, 4096)
// forward + backward at batch 64, against the three raw GEMMs it needs
// (y = x W^T, dX = dY W, dW = dY^T x), timed alternately in the same loop;
// its `ratio` counter is tandem's throughput over BLAS's (target >= 0.9).
#include <cblas.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "benchmark/benchmark.h"
#include "tensor/autograd/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/generator.h"
#include "tensor/nn/init.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

// Benchmarks have no Status channel: a failure skips the benchmark with the
// message (Google Benchmark prints it in the row).
#define BENCH_ASSIGN_OR_SKIP(lhs, expr) \
  BENCH_ASSIGN_OR_SKIP_IMPL_(BENCH_CONCAT_(so_, __LINE__), lhs, expr)
#define BENCH_CONCAT_INNER_(a, b) a##b
#define BENCH_CONCAT_(a, b) BENCH_CONCAT_INNER_(a, b)
#define BENCH_ASSIGN_OR_SKIP_IMPL_(so, lhs, expr)                    \
  auto so = (expr);                                                  \
  if (!so.ok()) {                                                    \
    state.SkipWithError(std::string(so.status().message()).c_str()); \
    return;                                                          \
  }                                                                  \
  lhs = std::move(so).value()
#define BENCH_OK_OR_SKIP(expr)                                \
  do {                                                        \
    const absl::Status s_ = (expr);                           \
    if (!s_.ok()) {                                           \
      state.SkipWithError(std::string(s_.message()).c_str()); \
      return;                                                 \
    }                                                         \
  } while (false)

benchmark::Counter Gflops(double flops_per_iteration) {
  return benchmark::Counter(flops_per_iteration / 1e9,
                            benchmark::Counter::kIsIterationInvariantRate);
}

absl::StatusOr<Tensor> RandomTensor(Shape shape, Generator& gen) {
  absl::StatusOr<Tensor> t = Tensor::Empty(std::move(shape));
  if (!t.ok()) return t;
  absl::Status s = nn::init::Uniform(*t, -1, 1, gen);
  if (!s.ok()) return s;
  return t;
}

std::vector<float> RandomVector(int64_t n, Generator& gen) {
  std::vector<float> v(static_cast<size_t>(n));
  gen.Uniform(v.data(), n, -1, 1);
  return v;
}

// ---- GEMM: C[M,N] = A[M,K] B[K,N].

void BM_MatMulTandem(benchmark::State& state) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  Generator gen(0);
  BENCH_ASSIGN_OR_SKIP(Tensor a, RandomTensor({m, k}, gen));
  BENCH_ASSIGN_OR_SKIP(Tensor b, RandomTensor({k, n}, gen));
  NoGradGuard no_grad;
  for (auto _ : state) {
    BENCH_ASSIGN_OR_SKIP(Tensor c, MatMul(a, b));
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.counters["GFLOP/s"] = Gflops(2.0 * m * n * k);
}

void BM_MatMulCblas(benchmark::State& state) {
  const int m = static_cast<int>(state.range(0));
  const int k = static_cast<int>(state.range(1));
  const int n = static_cast<int>(state.range(2));
  Generator gen(0);
  const std::vector<float> a = RandomVector(int64_t{m} * k, gen);
  const std::vector<float> b = RandomVector(int64_t{k} * n, gen);
  std::vector<float> c(static_cast<size_t>(m) * n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                a.data(), k, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = Gflops(2.0 * m * n * k);
}

void GemmSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "K", "N"});
  b->Args({64, 1024, 4096});
  b->Args({256, 256, 256});
  b->Args({1024, 1024, 1024});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_MatMulTandem)->Apply(GemmSizes);
BENCHMARK(BM_MatMulCblas)->Apply(GemmSizes);

// ---- Conv2d forward: x [N, C, H, W], weight [O, C, 3, 3], padding 1.

double ConvFlops(int64_t n, int64_t c, int64_t hw, int64_t o) {
  return 2.0 * n * o * hw * hw * c * 3 * 3;  // stride 1, same padding
}

void BM_Conv2dTandem(benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), hw = state.range(2),
                o = state.range(3);
  Generator gen(0);
  BENCH_ASSIGN_OR_SKIP(Tensor x, RandomTensor({n, c, hw, hw}, gen));
  BENCH_ASSIGN_OR_SKIP(Tensor w, RandomTensor({o, c, 3, 3}, gen));
  BENCH_ASSIGN_OR_SKIP(Tensor bias, RandomTensor({o}, gen));
  Conv2dOptions options;
  options.padding = {1, 1};
  NoGradGuard no_grad;
  for (auto _ : state) {
    BENCH_ASSIGN_OR_SKIP(Tensor y, Conv2d(x, w, bias, options));
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.counters["GFLOP/s"] = Gflops(ConvFlops(n, c, hw, o));
}

// The GEMM part alone of an im2col convolution of the same size: per image,
// weight [O, C*9] x columns [C*9, H*W]. Tandem's conv2d can at best reach
// this (it also builds the columns and adds the bias).
void BM_Conv2dGemmOnlyCblas(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int c = static_cast<int>(state.range(1));
  const int hw = static_cast<int>(state.range(2));
  const int o = static_cast<int>(state.range(3));
  Generator gen(0);
  const std::vector<float> w = RandomVector(int64_t{o} * c * 9, gen);
  const std::vector<float> cols = RandomVector(int64_t{c} * 9 * hw * hw, gen);
  std::vector<float> y(static_cast<size_t>(o) * hw * hw);
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, o, hw * hw, c * 9,
                  1.0f, w.data(), c * 9, cols.data(), hw * hw, 0.0f, y.data(),
                  hw * hw);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = Gflops(ConvFlops(n, c, hw, o));
}

void ConvSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "HW", "O"});
  b->Args({32, 3, 32, 16});  // CIFAR-like first layer
  b->Args({8, 64, 32, 64});  // a middle layer
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Conv2dTandem)->Apply(ConvSizes);
BENCHMARK(BM_Conv2dGemmOnlyCblas)->Apply(ConvSizes);

// ---- Linear(1024, 4096) forward + backward at batch 64.

constexpr int kBatch = 64;
constexpr int kIn = 1024;
constexpr int kOut = 4096;
constexpr double kLinearFlops = 3 * 2.0 * kBatch * kIn * kOut;

struct LinearFixture {
  std::unique_ptr<nn::Linear> layer;
  Tensor x;   // [64, 1024], requires grad (so dX is computed)
  Tensor dy;  // [64, 4096]
};

absl::StatusOr<LinearFixture> MakeLinear() {
  Generator gen(0);
  LinearFixture f;
  absl::StatusOr<std::unique_ptr<nn::Linear>> layer =
      nn::Linear::Create(kIn, kOut, gen);
  if (!layer.ok()) return layer.status();
  f.layer = *std::move(layer);
  absl::StatusOr<Tensor> x = RandomTensor({kBatch, kIn}, gen);
  if (!x.ok()) return x.status();
  f.x = *x;
  absl::Status s = f.x.set_requires_grad(true);
  if (!s.ok()) return s;
  absl::StatusOr<Tensor> dy = RandomTensor({kBatch, kOut}, gen);
  if (!dy.ok()) return dy.status();
  f.dy = *dy;
  return f;
}

absl::Status TandemLinearStep(LinearFixture& f) {
  absl::StatusOr<Tensor> y = f.layer->Forward(f.x);
  if (!y.ok()) return y.status();
  return y->Backward(f.dy);
}

struct RawLinear {
  std::vector<float> x, w, y, dy, dx, dw;
};

RawLinear MakeRawLinear() {
  Generator gen(0);
  RawLinear r;
  r.x = RandomVector(int64_t{kBatch} * kIn, gen);
  r.w = RandomVector(int64_t{kOut} * kIn, gen);
  r.dy = RandomVector(int64_t{kBatch} * kOut, gen);
  r.y.resize(static_cast<size_t>(kBatch) * kOut);
  r.dx.resize(static_cast<size_t>(kBatch) * kIn);
  r.dw.resize(static_cast<size_t>(kOut) * kIn);
  return r;
}

void RawLinearStep(RawLinear& r) {
  // y [64, 4096] = x [64, 1024] W^T (W is [4096, 1024])
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, kOut, kIn, 1.0f,
              r.x.data(), kIn, r.w.data(), kIn, 0.0f, r.y.data(), kOut);
  // dX [64, 1024] = dY [64, 4096] W [4096, 1024]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBatch, kIn, kOut,
              1.0f, r.dy.data(), kOut, r.w.data(), kIn, 0.0f, r.dx.data(), kIn);
  // dW [4096, 1024] = dY^T [4096, 64] x [64, 1024]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kOut, kIn, kBatch, 1.0f,
              r.dy.data(), kOut, r.x.data(), kIn, 0.0f, r.dw.data(), kIn);
}

void BM_Linear1024x4096FwdBwdTandem(benchmark::State& state) {
  BENCH_ASSIGN_OR_SKIP(LinearFixture f, MakeLinear());
  for (auto _ : state) {
    BENCH_OK_OR_SKIP(TandemLinearStep(f));
  }
  state.counters["GFLOP/s"] = Gflops(kLinearFlops);
}
BENCHMARK(BM_Linear1024x4096FwdBwdTandem)->Unit(benchmark::kMillisecond);

void BM_Linear1024x4096FwdBwdCblas(benchmark::State& state) {
  RawLinear r = MakeRawLinear();
  for (auto _ : state) {
    RawLinearStep(r);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = Gflops(kLinearFlops);
}
BENCHMARK(BM_Linear1024x4096FwdBwdCblas)->Unit(benchmark::kMillisecond);

// Process CPU time in seconds: on this shared 2-core machine it is far less
// sensitive to other load than wall time, and with --blas_threads=1 all the
// work runs on this thread anyway.
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

// Both in one loop, alternating, so background load hits both alike. The
// counters are computed from CPU time (see CpuSeconds).
void BM_Linear1024x4096_TandemVsBlas(benchmark::State& state) {
  BENCH_ASSIGN_OR_SKIP(LinearFixture f, MakeLinear());
  RawLinear r = MakeRawLinear();
  double tandem_s = 0;
  double blas_s = 0;
  for (auto _ : state) {
    const double t0 = CpuSeconds();
    BENCH_OK_OR_SKIP(TandemLinearStep(f));
    const double t1 = CpuSeconds();
    RawLinearStep(r);
    benchmark::ClobberMemory();
    const double t2 = CpuSeconds();
    tandem_s += t1 - t0;
    blas_s += t2 - t1;
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["tandem_GFLOP/s"] = kLinearFlops * iters / tandem_s / 1e9;
  state.counters["blas_GFLOP/s"] = kLinearFlops * iters / blas_s / 1e9;
  state.counters["ratio"] = blas_s / tandem_s;
}
BENCHMARK(BM_Linear1024x4096_TandemVsBlas)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

// ---- One MLP training step: 784-512-256-10, batch 64, cross entropy, Sgd
// with momentum. FLOPs count the three GEMMs per Linear layer.

void BM_MlpTrainStep(benchmark::State& state) {
  constexpr int64_t kMlpBatch = 64;
  const int64_t sizes[] = {784, 512, 256, 10};
  Generator gen(0);
  nn::Sequential model;
  double flops = 0;
  for (int i = 0; i < 3; ++i) {
    if (i > 0) BENCH_OK_OR_SKIP(model.Append(std::make_unique<nn::ReLU>()));
    BENCH_OK_OR_SKIP(
        model.Append(nn::Linear::Create(sizes[i], sizes[i + 1], gen)));
    flops += 3 * 2.0 * kMlpBatch * sizes[i] * sizes[i + 1];
  }
  BENCH_ASSIGN_OR_SKIP(Tensor x, RandomTensor({kMlpBatch, 784}, gen));
  std::vector<int64_t> labels(kMlpBatch);
  for (int64_t i = 0; i < kMlpBatch; ++i) labels[i] = i % 10;
  BENCH_ASSIGN_OR_SKIP(Tensor y, Tensor::FromVector<int64_t>(labels));
  optim::SgdOptions options;
  options.momentum = 0.9;
  BENCH_ASSIGN_OR_SKIP(optim::Sgd sgd,
                       optim::Sgd::Create(model.Parameters(), 0.01, options));
  for (auto _ : state) {
    sgd.ZeroGrad();
    BENCH_ASSIGN_OR_SKIP(Tensor logits, model.Forward(x));
    BENCH_ASSIGN_OR_SKIP(Tensor loss, CrossEntropy(logits, y));
    BENCH_OK_OR_SKIP(loss.Backward());
    BENCH_OK_OR_SKIP(sgd.Step());
  }
  state.counters["GFLOP/s"] = Gflops(flops);
}
BENCHMARK(BM_MlpTrainStep)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  int blas_threads = 1;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    constexpr const char kFlag[] = "--blas_threads=";
    if (i > 0 && std::strncmp(argv[i], kFlag, sizeof(kFlag) - 1) == 0) {
      const char* value = argv[i] + sizeof(kFlag) - 1;
      if (!absl::SimpleAtoi(value, &blas_threads) || blas_threads < 1 ||
          blas_threads > 1024) {
        std::fprintf(stderr,
                     "tensor_benchmark: --blas_threads must be an integer in "
                     "[1, 1024], got '%s'\n",
                     value);
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (absl::Status s = tandem::bench::CheckGoogleBenchmarkFlags(argc, argv);
      !s.ok()) {
    std::fprintf(stderr, "tensor_benchmark: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  const absl::Status s = tandem::cpu::SetBlasNumThreads(blas_threads);
  if (!s.ok()) {
    std::fprintf(stderr, "tensor_benchmark: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  benchmark::AddCustomContext("blas_threads", std::to_string(blas_threads));
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("tensor_benchmark")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("tensor_benchmark", Run(argc, argv));
}
