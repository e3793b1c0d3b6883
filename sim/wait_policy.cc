#include "sim/wait_policy.h"

#include <algorithm>
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

}  // namespace tandem::sim::internal
