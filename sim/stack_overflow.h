// Names a fiber's stack overflow instead of a bare SIGSEGV: a rank whose
// fiber runs past its stack (--sim_stack_kib too small for what it calls)
// touches the guard below it, and this process's SIGSEGV handler, on
// an alternate signal stack, says so before the default action ends the
// process (exit by SIGSEGV, as before, with a core where enabled).
//
//   StackOverflowReporter reporter(stack_bytes);  // on each worker thread
//   ...
//   reporter.Enter(stack_bottom);  // before switching to a fiber
//   ...                            // the fiber runs
//   reporter.Leave();              // back on the worker's stack
//
// A fault anywhere else goes to the handler that was installed before (or
// the default action). Not used under ASan or TSan, which watch stacks
// themselves. One reporter per thread; not shared between threads.
#ifndef TANDEM_SIM_STACK_OVERFLOW_H_
#define TANDEM_SIM_STACK_OVERFLOW_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::sim {

class StackOverflowReporter {
 public:
  // Installs the process's handler (once) and this thread's alternate
  // signal stack; `stack_bytes` is what each fiber got, for the message.
  explicit StackOverflowReporter(int64_t stack_bytes);
  // Restores the thread's previous alternate stack.
  ~StackOverflowReporter();
  StackOverflowReporter(const StackOverflowReporter&) = delete;
  StackOverflowReporter& operator=(const StackOverflowReporter&) = delete;

  // The thread now runs a fiber whose usable stack begins at `bottom`
  // (it grows down towards it): a fault just below is an overflow.
  void Enter(const char* bottom);
  void Leave();

 private:
  std::string message_;
  std::vector<char> alt_stack_;
  bool installed_ = false;
};

}  // namespace tandem::sim

#endif  // TANDEM_SIM_STACK_OVERFLOW_H_
