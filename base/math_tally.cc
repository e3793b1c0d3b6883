#include "base/math_tally.h"

#include <time.h>

#include <atomic>

#include "base/fiber_local.h"

namespace tandem::base {
namespace {

std::atomic<int> g_scopes{0};
thread_local double t_math_s = 0;
thread_local int t_depth = 0;
thread_local double t_cpu_origin_s = 0;

// A rank's tally follows it across fiber switches.
[[maybe_unused]] const bool kMathIsFiberLocal =
    RegisterFiberLocal<double>([]() -> double& { return t_math_s; }, 0.0);
[[maybe_unused]] const bool kDepthIsFiberLocal =
    RegisterFiberLocal<int>([]() -> int& { return t_depth; }, 0);

}  // namespace

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec) - t_cpu_origin_s;
}

void SetThreadCpuOrigin(double seconds) { t_cpu_origin_s = seconds; }

MathTallyScope::MathTallyScope() {
  g_scopes.fetch_add(1, std::memory_order_relaxed);
}
MathTallyScope::~MathTallyScope() {
  g_scopes.fetch_sub(1, std::memory_order_relaxed);
}

bool MathTallyOn() { return g_scopes.load(std::memory_order_relaxed) > 0; }

ScopedMathKernel::ScopedMathKernel() {
  if (t_depth++ == 0 && MathTallyOn()) start_s_ = ThreadCpuSeconds();
}

ScopedMathKernel::~ScopedMathKernel() {
  --t_depth;
  if (start_s_ >= 0) t_math_s += ThreadCpuSeconds() - start_s_;
}

double ThisThreadMathSeconds() { return t_math_s; }

}  // namespace tandem::base
