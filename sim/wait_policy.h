// How a simulated rank waits for another: the spin-then-park policy of
// sim/group.cc. A waiting rank first spins (checking, not sleeping) for at
// most Options::spin, then sleeps on the operation's futex word
// (sim/futex.h). Spinning only pays while every rank can have a core of its
// own: a spinning rank holds a core that the rank it waits for may need, and
// with more ranks than cores (8192 ranks on 2 cores, docs/sim_scale.md) it
// would only delay the others. So the spin is zero when the world size
// exceeds the CPUs this process may use, and with fibers (a spinning fiber
// holds its worker's other fibers).
#ifndef TANDEM_SIM_WAIT_POLICY_H_
#define TANDEM_SIM_WAIT_POLICY_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "sim/options.h"

namespace tandem::sim::internal {

// The CPUs this process may run on: its affinity mask (taskset, cgroup
// cpusets and container limits narrow it below the machine's hardware
// threads), else std::thread::hardware_concurrency(); at least 1. One
// system call; callers read it once per group.
int UsableCpus();

// The spin of a group of `world_size` ranks on `cpus` usable CPUs:
// options.spin (never negative) when ranks run as threads and world_size <=
// cpus, else zero.
absl::Duration EffectiveSpin(int world_size, const Options& options, int cpus);

// The spin of one rank's waits, adapted to how its recent spins ended. A
// spin that ends with the condition met doubles the next one (up to the
// group's spin); a spin that runs out halves it (down to kFloor): on a
// machine whose cores other processes also want, the rank being waited for
// is often not running, and a full spin then only burns the core it
// needs. Every kProbeEvery-th wait spins in full, so two ranks that fell
// into taking turns to sleep (each spin shorter than a wake-up) find each
// other again.
//
// Used by one waiting thread of one rank at a time (relaxed atomics, so a
// rank that waits from another thread later is still no data race). Cache
// line aligned: the ranks' budgets sit side by side in one array.
class alignas(64) SpinBudget {
 public:
  static constexpr absl::Duration kFloor = absl::Microseconds(1);
  static constexpr uint32_t kProbeEvery = 16;

  SpinBudget() = default;
  // Starts at (and never exceeds) `max`.
  void Reset(absl::Duration max);

  // The spin of the next wait, nanoseconds (0: do not spin).
  int64_t Next();
  // That spin of `spun_ns` ended with the condition met (`reached`) or ran
  // out.
  void Ended(int64_t spun_ns, bool reached);

 private:
  std::atomic<int64_t> max_ns_{0};
  std::atomic<int64_t> budget_ns_{0};
  std::atomic<uint32_t> waits_{0};
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_WAIT_POLICY_H_
