// CpuRelax(): the pause hint for one round of a bounded spin-wait. It tells
// the core (and a hypervisor) that this thread is waiting, which frees the
// sibling hardware thread and saves power. Never blocks.
#ifndef TANDEM_SIM_CPU_RELAX_H_
#define TANDEM_SIM_CPU_RELAX_H_

namespace tandem::sim::internal {

#if defined(__x86_64__) || defined(__i386__)
inline void CpuRelax() { __builtin_ia32_pause(); }
#elif defined(__aarch64__)
inline void CpuRelax() { asm volatile("yield" ::: "memory"); }
#else
inline void CpuRelax() {}
#endif

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_CPU_RELAX_H_
