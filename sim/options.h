// Options of a simulated cluster run (sim::Run): timeouts, waiting policy,
// injected faults, output capture and the network clock.
//
//   sim::Options options;
//   options.timeout = absl::Seconds(5);
//   options.faults = {sim::Fault::FailAt(/*rank=*/1, /*collective=*/3),
//                     sim::Fault::DelayAt(/*rank=*/2, /*collective=*/0,
//                                         absl::Milliseconds(50))};
//   sim::OutputCapture capture;
//   options.capture = &capture;
#ifndef TANDEM_SIM_OPTIONS_H_
#define TANDEM_SIM_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "sim/clock.h"

namespace tandem::sim {

class OutputCapture;

// A fault injected into one rank at one of its collectives. Collectives are
// numbered per rank from 0 in issue order (the `#k` of fingerprints);
// Send/Recv and argument errors do not count.
struct Fault {
  enum class Kind { kFail, kDelay };

  // Rank `rank` fails at its collective `collective`: that Work fails with
  // kUnavailable ("injected fault ...") and every other rank's pending and
  // future operations fail with kAborted naming `rank`, as if it crashed.
  static Fault FailAt(int rank, int64_t collective);
  // Rank `rank` sleeps `delay` before issuing its collective `collective`
  // (a straggler). The sleep ends early if the run aborts.
  static Fault DelayAt(int rank, int64_t collective, absl::Duration delay);

  Kind kind = Kind::kFail;
  int rank = 0;
  int64_t collective = 0;
  absl::Duration delay = absl::ZeroDuration();
};

// How sim::Run runs its ranks (docs/sim_scale.md).
enum class RankExecution {
  // One OS thread per rank (the default). Rank code may do anything a
  // thread may, including blocking on its own mutexes and condition
  // variables.
  kThreads,
  // One user-space fiber per rank, multiplexed on Options::fiber_workers
  // worker threads (sim/fiber.h). Waiting for a collective parks the fiber
  // instead of sleeping in the kernel: a 4 KiB all-reduce over 8192 ranks
  // takes milliseconds instead of hundreds of them. Rank code must not
  // block its thread on an OS primitive until another rank acts (the other
  // rank may be a fiber of the same worker: the run would hang until the
  // operation timeout, and the wait itself would not be bounded). Rank-
  // scoped thread_local state registered with base/fiber_local.h follows
  // each rank; other thread_locals are per worker thread.
  kFibers,
};

struct Options {
  RankExecution ranks = RankExecution::kThreads;

  // kFibers: worker threads; 0: std::thread::hardware_concurrency(). At most
  // the world size are started.
  int fiber_workers = 0;

  // Every operation must complete within `timeout` of being issued; if it
  // does not, it fails on every rank with kDeadlineExceeded naming the ranks
  // that never issued it, and the run aborts. Must be positive; may be
  // absl::InfiniteDuration() (rank failures and exits still end every wait).
  absl::Duration timeout = absl::Minutes(5);

  // A waiting rank first spins for up to `spin` (checking, not sleeping) and
  // then sleeps on the operation's futex word (sim/wait_policy.h). Spinning
  // is used only while the world size is at most the number of CPUs this
  // process may run on (its affinity mask: taskset and container limits
  // count), and never with fibers (a spinning fiber would keep its worker's
  // other fibers from running); with more ranks than CPUs every wait sleeps
  // at once. Each rank adapts its spin between 1 us and `spin`: halved when
  // a spin runs out, doubled when it pays, in full every 16th wait. Zero
  // disables spinning.
  // Why 100 us: a blocked thread takes tens of microseconds to run again
  // after its wake-up (more in a VM). With a spin shorter than that, two
  // ranks can settle into taking turns to sleep, each missing the other by
  // a few microseconds, and a 2 us all-reduce takes 30 us from then on.
  absl::Duration spin = absl::Microseconds(100);

  // While rank 0 waits for an operation, it writes one line to stderr this
  // often (counted from the operation's issue): "rank 0: still waiting for
  // collective #12 AllReduce(f32 x 1024, sum) for 30s; not yet issued by
  // rank 2 (it has issued 11 collectives); timeout in 4m30s", so a stuck run
  // never looks like a busy one. Zero: never. Must not be negative.
  absl::Duration stall_note_interval = absl::Seconds(30);

  std::vector<Fault> faults;

  // The stack of each rank's thread, bytes (rounded up to whole pages); 0:
  // the system default (8 MiB on Linux). glibc carves the program's static
  // thread-local storage out of it: about 200 KiB for digits_ddp (mostly its
  // libraries'; a smaller stack fails to start, naming this option).
  // Measured (docs/sim_scale.md): digits_ddp (DDP, amp, fsdp) and the
  // conformance suite run with 288 KiB in all and crash with 224 KiB, so
  // they use under 90 KiB of stack; 1 MiB leaves about 9x that, and 8192
  // ranks reserve 8 GiB of address space instead of 64 GiB. Only the pages
  // a rank touches cost memory. A rank that overflows its stack crashes the
  // process (SIGSEGV): raise this if a rank's function recurses deeply.
  // With kFibers: each fiber's stack (mmap'ed, with a 64 KiB guard; at least
  // 16 KiB). A fiber runs on its worker's thread-local storage, so none of
  // its stack goes to it.
  int64_t stack_bytes = 1 << 20;

  // When set, rank r's Communicator::output() is capture->sink(r) (lines are
  // kept per rank, see sim/output_capture.h); otherwise ranks print to stdout.
  // Must outlive the run.
  OutputCapture* capture = nullptr;

  // The network clock (sim/clock.h): when set, every rank keeps a simulated
  // time charged with its compute and the modelled time of its
  // communication on clock->topology, read with sim::ReadClock and returned
  // in RunResult::clocks. Off (unset) by default, and then it costs one
  // null-pointer test per operation.
  std::optional<ClockOptions> clock;
};

}  // namespace tandem::sim

#endif  // TANDEM_SIM_OPTIONS_H_
