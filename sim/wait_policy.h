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

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_WAIT_POLICY_H_
