// trace_benchmark: the cost of one timeline emit point (base/trace).
//
//   ./bazelw run -c opt //base/trace:trace_benchmark
//
// BM_ScopeOff is what every emit point costs while nothing records (the
// default): one relaxed atomic load and a branch. BM_ScopeOn is one recorded
// event (two clock reads, the name copied, an append to the thread's buffer);
// BM_ScopeOnThreads the same from 8 threads at once (ranks of a simulated
// cluster), each into its own buffer. BM_Baseline is the loop alone.
#include "base/trace/trace.h"
#include "benchmark/benchmark.h"

namespace tandem::trace {
namespace {

void BM_Baseline(benchmark::State& state) {
  int64_t n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(++n);
}
BENCHMARK(BM_Baseline);

void BM_ScopeOff(benchmark::State& state) {
  Stop();
  int64_t n = 0;
  for (auto _ : state) {
    Scope s("Linear[0] forward", "forward");
    benchmark::DoNotOptimize(++n);
  }
}
BENCHMARK(BM_ScopeOff);

void BM_ScopeOn(benchmark::State& state) {
  ScopedThreadRank rank(static_cast<int>(state.thread_index()));
  Start();  // idempotent: every thread records from its first iteration
  int64_t n = 0;
  for (auto _ : state) {
    Scope s("Linear[0] forward", "forward");
    benchmark::DoNotOptimize(++n);
  }
  if (state.thread_index() == 0) {
    Stop();
    Clear();
  }
}
// Recorded events stay in memory until Clear(): a fixed iteration count
// bounds it (200k events of about 150 bytes per run and thread).
BENCHMARK(BM_ScopeOn)->Iterations(200000);
BENCHMARK(BM_ScopeOn)
    ->Name("BM_ScopeOnThreads")
    ->Threads(8)
    ->Iterations(200000);

}  // namespace
}  // namespace tandem::trace

BENCHMARK_MAIN();
