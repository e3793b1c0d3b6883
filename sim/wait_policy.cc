#include "sim/wait_policy.h"

#include <algorithm>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"
#include "sim/options.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace tandem::sim::internal {

int UsableCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

absl::Duration EffectiveSpin(int world_size, const Options& options, int cpus) {
  if (options.ranks == RankExecution::kFibers) return absl::ZeroDuration();
  if (world_size > cpus) return absl::ZeroDuration();
  return std::max(options.spin, absl::ZeroDuration());
}

void SpinBudget::Reset(absl::Duration max) {
  const int64_t ns = std::max<int64_t>(0, absl::ToInt64Nanoseconds(max));
  max_ns_.store(ns, std::memory_order_relaxed);
  budget_ns_.store(ns, std::memory_order_relaxed);
  waits_.store(0, std::memory_order_relaxed);
}

int64_t SpinBudget::Next() {
  const uint32_t k = waits_.load(std::memory_order_relaxed);
  waits_.store(k + 1, std::memory_order_relaxed);
  if (k % kProbeEvery == kProbeEvery - 1) {
    return max_ns_.load(std::memory_order_relaxed);
  }
  return budget_ns_.load(std::memory_order_relaxed);
}

void SpinBudget::Ended(int64_t spun_ns, bool reached) {
  const int64_t max_ns = max_ns_.load(std::memory_order_relaxed);
  const int64_t floor_ns = std::min(max_ns, absl::ToInt64Nanoseconds(kFloor));
  // A probe (a full spin) that runs out does not raise the budget.
  const int64_t budget = budget_ns_.load(std::memory_order_relaxed);
  const int64_t next = reached
                           ? std::min(max_ns, std::max(floor_ns, 2 * spun_ns))
                           : std::max(floor_ns, std::min(budget, spun_ns) / 2);
  budget_ns_.store(next, std::memory_order_relaxed);
}

}  // namespace tandem::sim::internal
