// Math tally: how much of a thread's CPU time went to dense math kernels
// (matrix products and the convolutions built on them), so that a device
// profile can scale that part by FLOP/s and the rest (elementwise ops, the
// optimizer, copies: memory-bound work) by memory bandwidth. The simulated
// cluster's network clock reads it (sim/clock.h, ClockOptions::memory_scale).
//
//   base::MathTallyScope tally;                 // counting on (process-wide)
//   ...
//   { base::ScopedMathKernel k; cblas_sgemm(...); }   // in the GEMM wrapper
//   double s = base::ThisThreadMathSeconds();   // CPU seconds inside kernels
//
// Cost: off (no MathTallyScope alive), ScopedMathKernel is one relaxed atomic
// load; on, two reads of the thread CPU clock per kernel call.
// Thread safety: the tally is per thread (thread_local); MathTallyScope may
// be created and destroyed from any thread (an atomic count).
#ifndef TANDEM_BASE_MATH_TALLY_H_
#define TANDEM_BASE_MATH_TALLY_H_

namespace tandem::base {

// This thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID) minus its CPU
// origin (0 unless a fiber scheduler set one): on a fiber of the simulated
// cluster that charges CPU per fiber, the running fiber's own CPU time.
double ThreadCpuSeconds();

// Sets the origin ThreadCpuSeconds() subtracts on this thread. For fiber
// schedulers only (sim/fiber.h): at each switch-in, origin = raw CPU time -
// the fiber's CPU time so far; at each switch-out, back to 0.
void SetThreadCpuOrigin(double seconds);

// Turns counting on for its lifetime (nests: on while any is alive).
class MathTallyScope {
 public:
  MathTallyScope();
  ~MathTallyScope();
  MathTallyScope(const MathTallyScope&) = delete;
  MathTallyScope& operator=(const MathTallyScope&) = delete;
};

bool MathTallyOn();

// Around one dense math kernel call: while counting is on, adds the thread
// CPU time spent inside the scope to this thread's tally. Nested scopes
// (a convolution calling a GEMM) count once.
class ScopedMathKernel {
 public:
  ScopedMathKernel();
  ~ScopedMathKernel();
  ScopedMathKernel(const ScopedMathKernel&) = delete;
  ScopedMathKernel& operator=(const ScopedMathKernel&) = delete;

 private:
  double start_s_ = -1;  // -1: not counting (off, or nested)
};

// CPU seconds this thread (or fiber: the tally is fiber-local, see
// base/fiber_local.h) has spent inside ScopedMathKernel while counting
// was on, since the thread started. Monotonic.
double ThisThreadMathSeconds();

}  // namespace tandem::base

#endif  // TANDEM_BASE_MATH_TALLY_H_
