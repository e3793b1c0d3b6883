// Fibers for the simulated cluster: ranks that are not OS threads but
// user-space contexts multiplexed on a few worker threads (one per core by
// default), so that a collective over 8192 ranks costs 8192 switches of a
// few tens of nanoseconds instead of 8192 kernel sleeps and wake-ups.
//
//   FiberScheduler scheduler({.workers = 2, .stack_bytes = 1 << 20});
//   for (int r = 0; r < n; ++r) {
//     TANDEM_RETURN_IF_ERROR(scheduler.Spawn([r] { ... }));
//   }
//   scheduler.Run();   // every fiber has returned
//
// Scheduling: each fiber is pinned to one worker for its whole life
// (fibers never migrate): its thread-local state, its CPU clock and the
// ThreadSanitizer view stay simple, and a wake-up from another worker is a
// push on the owner's queue. Each worker runs its ready fibers in FIFO
// order until they park (ParkCurrentFiber) or return; a parked fiber runs
// again after UnparkFiber, or when its deadline passes (a timer heap per
// worker), so every park is bounded when the caller gives a deadline.
//
// What a fiber must not do: block its worker thread on an OS primitive
// (a mutex held across a wait, a condition variable, a sleep, a pipe)
// until *another fiber* acts. The other fiber may be pinned to the same
// worker and never run: the worker deadlocks. Waits for other fibers must
// go through ParkCurrentFiber (the sim's EventWord does). Short critical
// sections under a std::mutex are fine: a fiber never parks while holding
// one, so the holder always finishes.
//
// Fiber-local state: on every switch the scheduler swaps the registered
// fiber-local variables (base/fiber_local.h), and, when Config::track_cpu is
// set, the thread CPU clock origin (base::ThreadCpuSeconds() reads the
// running fiber's own CPU time).
//
// Thread safety: Spawn and Run from one owner thread; UnparkFiber from any
// thread; the Current*/Park/Yield functions from the fiber itself.
#ifndef TANDEM_SIM_FIBER_H_
#define TANDEM_SIM_FIBER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tandem::sim::internal {

struct Fiber;
struct FiberWorker;

class FiberScheduler {
 public:
  struct Config {
    // Worker threads; 0: std::thread::hardware_concurrency() (at least 1).
    int workers = 0;
    // Each fiber's stack, bytes (at least 16 KiB; a 64 KiB guard below it).
    int64_t stack_bytes = 1 << 20;
    // Charge each fiber only its own CPU time (two reads of the thread CPU
    // clock per switch; off, base::ThreadCpuSeconds() reads the worker's).
    bool track_cpu = false;
  };

  explicit FiberScheduler(const Config& config);
  ~FiberScheduler();
  FiberScheduler(const FiberScheduler&) = delete;
  FiberScheduler& operator=(const FiberScheduler&) = delete;

  int workers() const { return static_cast<int>(workers_.size()); }

  // Adds a fiber running `fn`, pinned to worker `worker` (0 <= worker <
  // workers(); -1: (fibers so far) % workers). Only before Run.
  // kResourceExhausted when its stack cannot be mapped.
  absl::Status Spawn(std::function<void()> fn, int worker = -1);

  // Runs every fiber to completion on the worker threads and joins them.
  // Blocks the caller. Call once.
  void Run();

 private:
  friend struct FiberWorker;
  const Config config_;
  std::vector<std::unique_ptr<FiberWorker>> workers_;
  std::vector<std::unique_ptr<Fiber>> fibers_;
};

using FiberDeadline = std::chrono::steady_clock::time_point;

// The fiber running on this thread; null on a thread that is not running
// one (then the functions below that need a fiber must not be called).
Fiber* CurrentFiber();

// Suspends the current fiber until UnparkFiber(it) or `deadline`
// (FiberDeadline::max(): no timer). May return early (an unpark meant for an
// earlier park): callers re-check their condition in a loop.
void ParkCurrentFiber(FiberDeadline deadline);

// Makes `fiber` runnable if it is parked, or makes its next park return at
// once if it is running. From any thread; `fiber` must belong to a
// scheduler that has not finished Run (a fiber that has returned ignores it).
void UnparkFiber(Fiber* fiber);

// Unparks many fibers (UnparkFiber for each) and hands those pinned to other
// workers over in one batch per worker when destroyed: one lock per worker
// instead of one per fiber. Not thread-safe: one thread's local object.
class UnparkBatch {
 public:
  UnparkBatch() = default;
  ~UnparkBatch();
  UnparkBatch(const UnparkBatch&) = delete;
  UnparkBatch& operator=(const UnparkBatch&) = delete;

  void Unpark(Fiber* fiber);

 private:
  // Fibers of one worker handed over at once (and the rest at the end).
  static constexpr size_t kUnparkChunk = 128;
  std::vector<std::pair<FiberWorker*, std::vector<Fiber*>>> remote_;
};

// Lets the worker's other ready fibers run first.
void YieldCurrentFiber();

// YieldCurrentFiber() on a fiber; nothing on a plain thread. For polling
// loops (Work::IsCompleted returning false): a fiber that polls must let the
// ranks it waits for run.
void YieldIfOnFiber();

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_FIBER_H_
