// Mixed-precision kernels next to their f32 peers, on one thread:
//   BM_Gemm{F32,Bf16}/M/N/K   C = A·B (the bf16 one through oneDNN's matmul
//                             primitive, or its f32 fallback: the label says
//                             which; tensor/cpu/gemm_bf16.h)
//   BM_LinearStep{F32,Bf16}   Linear 1024 -> 4096, batch 64, forward +
//                             backward (the bf16 one under autocast, f32
//                             master weights)
// items_per_second is FLOP/s. ./bazelw run -c opt //bench:amp_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "tensor/amp/autocast.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/generator.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> v(static_cast<size_t>(n));
  gen.Uniform(v.data(), n, -1.f, 1.f);
  return v;
}

std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = BFloat16(v[i]).bits;
  return out;
}

void BM_GemmF32(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  for (auto _ : state) {
    benchmark::DoNotOptimize(cpu::Gemm<float>(
        false, false, m, n, k, 1.f, a.data(), b.data(), 0.f, c.data()));
  }
  state.SetItemsProcessed(state.iterations() * 2 * m * n * k);
}

void BM_GemmBf16(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const std::vector<uint16_t> a = ToBf16(Random(m * k, 1));
  const std::vector<uint16_t> b = ToBf16(Random(k * n, 2));
  std::vector<uint16_t> c(static_cast<size_t>(m * n));
  for (auto _ : state) {
    benchmark::DoNotOptimize(cpu::GemmBf16({.m = m, .n = n, .k = k}, a.data(),
                                           b.data(), nullptr, c.data()));
  }
  state.SetItemsProcessed(state.iterations() * 2 * m * n * k);
  state.SetLabel(cpu::HasNativeBf16Gemm() ? "oneDNN bf16" : "f32 fallback");
}

void GemmSizes(benchmark::internal::Benchmark* b) {
  b->Args({2048, 2048, 2048})->Args({64, 4096, 1024})->Args({64, 1024, 4096});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_GemmF32)->Apply(GemmSizes);
BENCHMARK(BM_GemmBf16)->Apply(GemmSizes);

void LinearStep(benchmark::State& state, bool bf16) {
  constexpr int64_t kBatch = 64, kIn = 1024, kOut = 4096;
  Tensor x =
      Tensor::FromVector<float>(Random(kBatch * kIn, 3), {kBatch, kIn}).value();
  Tensor w =
      Tensor::FromVector<float>(Random(kOut * kIn, 4), {kOut, kIn}).value();
  Tensor b = Tensor::FromVector<float>(Random(kOut, 5), {kOut}).value();
  (void)w.set_requires_grad(true);
  (void)b.set_requires_grad(true);
  for (auto _ : state) {
    Tensor loss;
    {
      amp::Autocast autocast(DeviceType::kCPU, DType::kBF16, bf16);
      Tensor y = Linear(x, w, b).value();
      loss = Sum(y).value();
    }
    benchmark::DoNotOptimize(loss.Backward());
    w.ClearGrad();
    b.ClearGrad();
  }
  // Forward and the weight gradient: two GEMMs of 2 * batch * in * out.
  state.SetItemsProcessed(state.iterations() * 4 * kBatch * kIn * kOut);
  if (bf16) {
    state.SetLabel(cpu::HasNativeBf16Gemm() ? "oneDNN bf16" : "f32 fallback");
  }
}
void BM_LinearStepF32(benchmark::State& state) { LinearStep(state, false); }
void BM_LinearStepBf16(benchmark::State& state) { LinearStep(state, true); }
BENCHMARK(BM_LinearStepF32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LinearStepBf16)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem

BENCHMARK_MAIN();
