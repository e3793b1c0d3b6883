// FiberStack and SwitchContext: the machine-level half of the simulated
// cluster's fibers (sim/fiber.h has the scheduler).
//
// A FiberStack is an mmap'ed stack with an inaccessible 64 KiB guard below it,
// so an overflow faults (SIGSEGV) instead of corrupting a neighbour. Only
// the pages a fiber touches cost memory.
//
// SwitchContext saves the callee-saved state of the running code into
// `from` and resumes `to`. On x86-64 Linux it is a dozen instructions
// (rbx, rbp, r12-r15, the stack pointer, MXCSR and the x87 control word:
// about 10 ns); elsewhere it falls back to ucontext (swapcontext, which
// also saves the signal mask with a system call per switch).
//
// Not thread-safe: a context is resumed by one thread at a time, and a
// fiber's context is only touched by the thread that runs it.
#ifndef TANDEM_SIM_FIBER_CONTEXT_H_
#define TANDEM_SIM_FIBER_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

#if !(defined(__x86_64__) && defined(__linux__))
#include <ucontext.h>
#define TANDEM_FIBER_UCONTEXT 1
#endif

namespace tandem::sim::internal {

class FiberStack {
 public:
  // `bytes` of usable stack (rounded up to whole pages, at least 16 KiB)
  // plus the 64 KiB guard. kResourceExhausted when the mapping fails.
  static absl::StatusOr<std::unique_ptr<FiberStack>> Create(int64_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  // The usable range [bottom, bottom + size): the stack grows down from
  // bottom + size.
  char* bottom() const { return base_ + guard_; }
  size_t size() const { return size_; }

 private:
  FiberStack(char* base, size_t guard, size_t size)
      : base_(base), guard_(guard), size_(size) {}
  char* const base_;
  const size_t guard_;
  const size_t size_;
};

// A suspended execution: the thread's own (saved by the first switch away
// from it) or a fiber's.
struct MachineContext {
#if TANDEM_FIBER_UCONTEXT
  ucontext_t uc;
#else
  void* sp = nullptr;
#endif
};

// Prepares `ctx` to run entry(arg) on `stack` at its first resume. `entry`
// must never return (it switches away for the last time instead).
void MakeContext(MachineContext& ctx, const FiberStack& stack,
                 void (*entry)(void*), void* arg);

// Saves the running code into `from` and resumes `to`; returns when some
// thread switches back to `from`.
void SwitchContext(MachineContext& from, MachineContext& to);

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_FIBER_CONTEXT_H_
