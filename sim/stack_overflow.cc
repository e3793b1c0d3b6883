#include "sim/stack_overflow.h"

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::sim {
namespace {

// Below a fiber's stack: its guard page, and the unmapped or foreign pages a
// large frame may jump to past it.
constexpr int64_t kBelow = 1 << 20;

// This thread's running fiber: [lo, hi) is the region under its stack.
// Plain thread_locals of the executable (static TLS): readable in a
// handler.
thread_local const char* t_lo = nullptr;
thread_local const char* t_hi = nullptr;
thread_local const char* t_message = nullptr;
thread_local size_t t_message_size = 0;

struct sigaction g_previous;

void OnSegv(int sig, siginfo_t* info, void* context) {
  const char* addr = static_cast<const char*>(info->si_addr);
  if (t_hi != nullptr && addr >= t_lo && addr < t_hi) {
    if (write(STDERR_FILENO, t_message, t_message_size) < 0) {
      // stderr is gone; the default action still ends the process.
    }
    signal(SIGSEGV, SIG_DFL);
    return;  // the faulting access runs again and takes the default action
  }
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGSEGV, SIG_DFL);
}

void InstallOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_sigaction = OnSegv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous);
  });
}

}  // namespace

StackOverflowReporter::StackOverflowReporter(int64_t stack_bytes)
    : message_(absl::StrCat(
          "sim: a rank's fiber overflowed its stack of ", stack_bytes / 1024,
          " KiB (it called deeper than that allows); give ranks a larger "
          "stack: --sim_stack_kib in the examples (sim::Options::stack_bytes), "
          "or use --sim_ranks=threads\n")),
      alt_stack_(64 * 1024) {
  stack_t alt = {};
  alt.ss_sp = alt_stack_.data();
  alt.ss_size = alt_stack_.size();
  if (sigaltstack(&alt, nullptr) != 0) return;  // then no report
  installed_ = true;
  t_message = message_.data();
  t_message_size = message_.size();
  InstallOnce();
}

StackOverflowReporter::~StackOverflowReporter() {
  Leave();
  t_message = nullptr;
  if (installed_) {
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
}

void StackOverflowReporter::Enter(const char* bottom) {
  if (!installed_) return;
  t_lo = bottom - kBelow;
  t_hi = bottom;
}

void StackOverflowReporter::Leave() {
  t_hi = nullptr;
  t_lo = nullptr;
}

}  // namespace tandem::sim
