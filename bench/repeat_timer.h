// Timing a piece of work by repeating it: the benchmarks' one loop for
// "how many times per second does this run?".
//
//   const double per_s = bench::RepeatsPerSecond([&] { Gemms(); }, 0.5);
//   const double gflops = flops_per_call * per_s / 1e9;
//
// Runs `once` one time untimed (warm-up: primitive creation, scratch
// buffers, first-touch pages), then repeatedly until at least `seconds` of
// wall time have passed (at least once). Blocking; not thread-safe (it runs
// `once` on the calling thread).
#ifndef TANDEM_BENCH_REPEAT_TIMER_H_
#define TANDEM_BENCH_REPEAT_TIMER_H_

#include <chrono>
#include <cstdint>
#include <functional>

namespace tandem::bench {

// Seconds on the steady clock (for differences only).
inline double SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The warm-up before a size sweep's first timed size (--warmup_seconds) runs
// that size in batches of about 50 ms until the time is spent: this many
// operations per batch, given one operation's probed seconds (every rank
// passes the same, all-ranks probe, so every rank issues the same batches).
inline int64_t WarmUpBatch(double seconds_per_op) {
  const double n = 0.05 / (seconds_per_op > 1e-9 ? seconds_per_op : 1e-9);
  return n < 1 ? 1 : n > 100000 ? 100000 : static_cast<int64_t>(n);
}

inline double RepeatsPerSecond(const std::function<void()>& once,
                               double seconds) {
  once();  // warm
  int64_t reps = 0;
  const double start = SteadySeconds();
  double elapsed = 0;
  do {
    once();
    ++reps;
    elapsed = SteadySeconds() - start;
  } while (elapsed < seconds);
  return static_cast<double>(reps) / elapsed;
}

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_REPEAT_TIMER_H_
