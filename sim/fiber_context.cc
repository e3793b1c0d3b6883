#include "sim/fiber_context.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#if !TANDEM_FIBER_UCONTEXT
// tandem_fiber_switch(void** save_sp, void* load_sp): pushes the
// callee-saved registers and the floating-point control state on the
// current stack, stores the stack pointer in *save_sp, loads load_sp and
// pops the same layout from there (System V x86-64 ABI: everything else is
// caller-saved, so the compiler has already spilled it).
// tandem_fiber_start: the first "return address" of a new fiber; the
// context's r12 holds the argument and r13 the entry function.
asm(R"(
  .text
  .globl tandem_fiber_switch
  .type tandem_fiber_switch, @function
  .p2align 4
tandem_fiber_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size tandem_fiber_switch, .-tandem_fiber_switch

  .globl tandem_fiber_start
  .type tandem_fiber_start, @function
  .p2align 4
tandem_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  callq *%r13
  ud2
  .cfi_endproc
  .size tandem_fiber_start, .-tandem_fiber_start
)");

extern "C" void tandem_fiber_switch(void** save_sp, void* load_sp);
extern "C" void tandem_fiber_start();
#endif

namespace tandem::sim::internal {
namespace {

size_t PageSize() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FiberStack>> FiberStack::Create(int64_t bytes) {
  const size_t page = PageSize();
  const size_t want = static_cast<size_t>(std::max<int64_t>(bytes, 16 << 10));
  const size_t size = (want + page - 1) / page * page;
  // The guard is 64 KiB, not one page: a frame larger than the guard (a
  // local array, a deep inline expansion) steps over a one-page guard into
  // the next fiber's stack, mapped just below, and corrupts it silently
  // instead of faulting here. PROT_NONE pages cost address space only.
  const size_t guard = std::max<size_t>(page, (64 << 10) / page * page);
  void* base =
      mmap(nullptr, size + guard, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sim: could not map a fiber stack of ", size,
                     " bytes: ", std::strerror(errno),
                     " (too many ranks for the address space or "
                     "vm.max_map_count: lower --sim_stack_kib in the examples "
                     "(sim::Options::stack_bytes) or "
                     "the world size)"));
  }
  if (mprotect(base, guard, PROT_NONE) != 0) {
    const int err = errno;
    munmap(base, size + guard);
    return absl::ResourceExhaustedError(
        absl::StrCat("sim: could not protect a fiber stack's guard page: ",
                     std::strerror(err)));
  }
  return std::unique_ptr<FiberStack>(
      new FiberStack(static_cast<char*>(base), guard, size));
}

FiberStack::~FiberStack() { munmap(base_, guard_ + size_); }

#if TANDEM_FIBER_UCONTEXT

void MakeContext(MachineContext& ctx, const FiberStack& stack,
                 void (*entry)(void*), void* arg) {
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stack.bottom();
  ctx.uc.uc_stack.ss_size = stack.size();
  ctx.uc.uc_link = nullptr;
  // makecontext passes int arguments: split the pointers in halves.
  const uintptr_t e = reinterpret_cast<uintptr_t>(entry);
  const uintptr_t a = reinterpret_cast<uintptr_t>(arg);
  makecontext(&ctx.uc,
              reinterpret_cast<void (*)()>(+[](unsigned e_hi, unsigned e_lo,
                                               unsigned a_hi, unsigned a_lo) {
                auto fn = reinterpret_cast<void (*)(void*)>(
                    (static_cast<uintptr_t>(e_hi) << 32) | e_lo);
                fn(reinterpret_cast<void*>(
                    (static_cast<uintptr_t>(a_hi) << 32) | a_lo));
              }),
              4, static_cast<unsigned>(e >> 32), static_cast<unsigned>(e),
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a));
}

void SwitchContext(MachineContext& from, MachineContext& to) {
  swapcontext(&from.uc, &to.uc);
}

#else

void MakeContext(MachineContext& ctx, const FiberStack& stack,
                 void (*entry)(void*), void* arg) {
  // The layout tandem_fiber_switch pops, from the lowest address: the
  // control words (MXCSR, x87 CW), r15, r14, r13 (entry), r12 (arg), rbx,
  // rbp, the return address (tandem_fiber_start) in the top 8 bytes. After
  // `ret` the stack pointer is the 16-byte aligned top, as the ABI wants
  // before tandem_fiber_start's call.
  uintptr_t top = reinterpret_cast<uintptr_t>(stack.bottom() + stack.size());
  top &= ~static_cast<uintptr_t>(15);
  uint64_t* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = reinterpret_cast<uint64_t>(&tandem_fiber_start);
  *--sp = 0;                                  // rbp
  *--sp = 0;                                  // rbx
  *--sp = reinterpret_cast<uint64_t>(arg);    // r12
  *--sp = reinterpret_cast<uint64_t>(entry);  // r13
  *--sp = 0;                                  // r14
  *--sp = 0;                                  // r15
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  uint64_t control = mxcsr | (static_cast<uint64_t>(fpucw) << 32);
  *--sp = control;
  ctx.sp = sp;
}

void SwitchContext(MachineContext& from, MachineContext& to) {
  tandem_fiber_switch(&from.sp, to.sp);
}

#endif

}  // namespace tandem::sim::internal
