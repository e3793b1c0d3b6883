#include "sim/fiber.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/fiber_local.h"
#include "base/math_tally.h"
#include "sim/fiber_context.h"
#include "sim/stack_overflow.h"

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TANDEM_FIBER_TSAN 1
#endif
#if __has_feature(address_sanitizer)
#define TANDEM_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TANDEM_FIBER_TSAN 1
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TANDEM_FIBER_ASAN 1
#endif

#if TANDEM_FIBER_TSAN
// ThreadSanitizer's fiber interface (libtsan exports these; GCC and Clang
// ship no header for them): without it TSan would see one thread's shadow
// stack jump between unrelated stacks and report nonsense.
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif
#if TANDEM_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__GLIBCXX__)
#include <cxxabi.h>
#endif

namespace tandem::sim::internal {
namespace {

#if defined(__GLIBCXX__)
// The C++ runtime's per-thread exception state (the exceptions being
// handled and std::uncaught_exceptions()): a rank that parks while an
// exception unwinds it (a Work's destructor waiting) must not make every
// other fiber of its worker look as if it were unwinding too. libstdc++'s
// layout (the Itanium C++ ABI's __cxa_eh_globals).
struct EhGlobals {
  void* caught_exceptions = nullptr;
  unsigned int uncaught_exceptions = 0;
};
EhGlobals& ThreadEhGlobals() {
  return *reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals());
}
[[maybe_unused]] const bool kExceptionStateIsFiberLocal =
    base::RegisterFiberLocal<EhGlobals>(&ThreadEhGlobals, EhGlobals());
#endif

}  // namespace

struct Fiber {
  // Whether the fiber may be made runnable by UnparkFiber.
  enum State : int {
    kRunnable,  // running, or in a ready queue
    kParked,    // suspended in ParkCurrentFiber
    kNotified,  // unparked while runnable: its next park returns at once
    kDone,      // its function has returned
  };
  // What the fiber asked its worker for when it switched back.
  enum class Request { kNone, kPark, kYield, kExit };

  std::function<void()> fn;
  std::unique_ptr<FiberStack> stack;
  MachineContext context;
  FiberWorker* worker = nullptr;
  std::atomic<int> state{kRunnable};
  Request request = Request::kNone;
  FiberDeadline deadline = FiberDeadline::max();
  // Timer: armed while parked with a finite deadline; park_seq names the
  // park its heap entry belongs to (entries of older parks are stale).
  bool timer_armed = false;
  uint64_t park_seq = 0;
  Fiber* next = nullptr;  // the worker's ready queue
  double cpu_s = 0;       // CPU time of its own slices (track_cpu)
  base::FiberLocals locals;
  void* tsan = nullptr;
  void* asan_fake_stack = nullptr;
};

struct FiberWorker {
  FiberWorker(const FiberScheduler::Config& config, int index)
      : config(config), index(index) {}

  // Runs fibers until every fiber pinned here has returned.
  void Loop();
  // Makes `f` (pinned here, just taken out of kParked) runnable: pushed on
  // the local queue from this worker's own thread, else on the remote one.
  void Push(Fiber* f);
  void PushLocal(Fiber* f);
  // Pushes fibers pinned here from another thread, with one lock.
  void PushRemote(const std::vector<Fiber*>& fibers);
  void RunFiber(Fiber* f);
  void DrainRemote();
  // This worker thread's reporter of fiber stack overflows (set by Loop).
  StackOverflowReporter* overflow = nullptr;
  void FireTimers();

  void ArmTimer(Fiber* f);
  void DisarmTimer(Fiber* f);

  const FiberScheduler::Config config;
  const int index;
  MachineContext home;
  Fiber* current = nullptr;
  Fiber* head = nullptr;
  Fiber* tail = nullptr;
  // Timers: a min-heap on deadline (std::push_heap with TimerLater). An
  // entry is not removed when its fiber wakes early (most do: the deadline
  // is the operation's timeout); it is dropped when it reaches the top, or
  // when stale entries outnumber armed ones (a rebuild, amortised O(1)).
  // Deadlines are mostly pushed in increasing order, so a push rarely sifts.
  struct Timer {
    FiberDeadline deadline;
    Fiber* fiber;
    uint64_t park_seq;
  };
  struct TimerLater {
    bool operator()(const Timer& a, const Timer& b) const {
      return a.deadline > b.deadline;
    }
  };
  std::vector<Timer> timers;
  int64_t armed = 0;       // fibers with timer_armed
  int64_t since_fire = 0;  // fibers run since timers were last checked
  int64_t live = 0;        // pinned fibers that have not returned

  // Wake-ups from other threads.
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Fiber*> remote;  // guarded by mu
  bool idle = false;           // guarded by mu: Loop sleeps on cv
  std::atomic<bool> has_remote{false};

  void* tsan_home = nullptr;
  const void* asan_home_bottom = nullptr;
  size_t asan_home_size = 0;
  void* asan_home_fake_stack = nullptr;
};

namespace {

thread_local FiberWorker* t_worker = nullptr;

// Switches from the running fiber back to its worker's loop.
void SwitchToWorker(Fiber* f, bool exiting) {
  FiberWorker* w = f->worker;
#if TANDEM_FIBER_TSAN
  __tsan_switch_to_fiber(w->tsan_home, 0);
#endif
#if TANDEM_FIBER_ASAN
  __sanitizer_start_switch_fiber(exiting ? nullptr : &f->asan_fake_stack,
                                 w->asan_home_bottom, w->asan_home_size);
#else
  (void)exiting;
#endif
  SwitchContext(f->context, w->home);
#if TANDEM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(f->asan_fake_stack, &w->asan_home_bottom,
                                  &w->asan_home_size);
#endif
}

void FiberEntry(void* arg) {
  Fiber* f = static_cast<Fiber*>(arg);
#if TANDEM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &f->worker->asan_home_bottom,
                                  &f->worker->asan_home_size);
#endif
  // A fiber's function must not throw (sim::Run's rank wrapper catches
  // everything): there is no frame below this one to unwind into.
  try {
    f->fn();
  } catch (...) {
    std::terminate();
  }
  f->fn = nullptr;  // its captures die on the fiber, like a thread's
  f->request = Fiber::Request::kExit;
  SwitchToWorker(f, /*exiting=*/true);
  __builtin_unreachable();
}

}  // namespace

// ------------------------------------------------------------ FiberWorker

void FiberWorker::PushLocal(Fiber* f) {
  f->next = nullptr;
  if (tail == nullptr) {
    head = tail = f;
  } else {
    tail->next = f;
    tail = f;
  }
}

void FiberWorker::Push(Fiber* f) {
  if (t_worker == this) {
    PushLocal(f);
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  remote.push_back(f);
  has_remote.store(true, std::memory_order_release);
  if (idle) cv.notify_one();
}

void FiberWorker::PushRemote(const std::vector<Fiber*>& fibers) {
  std::lock_guard<std::mutex> lock(mu);
  remote.insert(remote.end(), fibers.begin(), fibers.end());
  has_remote.store(true, std::memory_order_release);
  if (idle) cv.notify_one();
}

void FiberWorker::DrainRemote() {
  if (!has_remote.load(std::memory_order_acquire)) return;
  std::vector<Fiber*> woken;
  {
    std::lock_guard<std::mutex> lock(mu);
    woken.swap(remote);
    has_remote.store(false, std::memory_order_relaxed);
  }
  for (Fiber* f : woken) PushLocal(f);
  // Keep the vector's capacity for the next round.
  std::lock_guard<std::mutex> lock(mu);
  if (remote.empty()) {
    woken.clear();
    remote.swap(woken);
  }
}

void FiberWorker::FireTimers() {
  since_fire = 0;
  if (timers.empty()) return;
  const FiberDeadline now = std::chrono::steady_clock::now();
  while (!timers.empty() && timers.front().deadline <= now) {
    const Timer t = timers.front();
    std::pop_heap(timers.begin(), timers.end(), TimerLater());
    timers.pop_back();
    Fiber* f = t.fiber;
    if (!f->timer_armed || f->park_seq != t.park_seq) continue;  // stale
    DisarmTimer(f);
    int expected = Fiber::kParked;
    if (f->state.compare_exchange_strong(expected, Fiber::kRunnable,
                                         std::memory_order_acq_rel)) {
      PushLocal(f);
    }
    // Otherwise an unpark has already queued it.
  }
}

void FiberWorker::ArmTimer(Fiber* f) {
  f->timer_armed = true;
  ++armed;
  timers.push_back({f->deadline, f, f->park_seq});
  std::push_heap(timers.begin(), timers.end(), TimerLater());
  // Mostly stale: keep only the armed entries.
  if (static_cast<int64_t>(timers.size()) > 2 * armed + 1024) {
    std::vector<Timer> live;
    live.reserve(armed);
    for (const Timer& t : timers) {
      if (t.fiber->timer_armed && t.fiber->park_seq == t.park_seq) {
        live.push_back(t);
      }
    }
    timers.swap(live);
    std::make_heap(timers.begin(), timers.end(), TimerLater());
  }
}

void FiberWorker::DisarmTimer(Fiber* f) {
  f->timer_armed = false;
  --armed;
}

void FiberWorker::RunFiber(Fiber* f) {
  if (f->timer_armed) DisarmTimer(f);
  current = f;
  f->request = Fiber::Request::kNone;
  if (config.track_cpu) {
    base::SetThreadCpuOrigin(0);
    base::SetThreadCpuOrigin(base::ThreadCpuSeconds() - f->cpu_s);
  }
  f->locals.Swap();
#if TANDEM_FIBER_TSAN
  __tsan_switch_to_fiber(f->tsan, 0);
#endif
#if TANDEM_FIBER_ASAN
  __sanitizer_start_switch_fiber(&asan_home_fake_stack, f->stack->bottom(),
                                 f->stack->size());
#endif
#if !TANDEM_FIBER_ASAN && !TANDEM_FIBER_TSAN
  if (overflow != nullptr) overflow->Enter(f->stack->bottom());
#endif
  SwitchContext(home, f->context);
#if !TANDEM_FIBER_ASAN && !TANDEM_FIBER_TSAN
  if (overflow != nullptr) overflow->Leave();
#endif
#if TANDEM_FIBER_ASAN
  __sanitizer_finish_switch_fiber(asan_home_fake_stack, nullptr, nullptr);
#endif
  f->locals.Swap();
  if (config.track_cpu) {
    f->cpu_s = base::ThreadCpuSeconds();
    base::SetThreadCpuOrigin(0);
  }
  current = nullptr;
  switch (f->request) {
    case Fiber::Request::kExit:
      f->state.store(Fiber::kDone, std::memory_order_seq_cst);
      f->stack.reset();  // we are on the worker's stack now
#if TANDEM_FIBER_TSAN
      __tsan_destroy_fiber(f->tsan);
      f->tsan = nullptr;
#endif
      --live;
      break;
    case Fiber::Request::kYield:
    case Fiber::Request::kNone:
      PushLocal(f);
      break;
    case Fiber::Request::kPark: {
      int expected = Fiber::kRunnable;
      if (f->state.compare_exchange_strong(expected, Fiber::kParked,
                                           std::memory_order_acq_rel)) {
        // Parked. The timer is this thread's alone, so arming it after the
        // fiber became visible as parked is safe: an unpark in between only
        // queues it (remotely), and RunFiber disarms the timer.
        ++f->park_seq;
        if (f->deadline != FiberDeadline::max()) ArmTimer(f);
      } else {
        // Unparked while it was on its way to park: run it again.
        f->state.store(Fiber::kRunnable, std::memory_order_seq_cst);
        PushLocal(f);
      }
      break;
    }
  }
}

void FiberWorker::Loop() {
  t_worker = this;
#if !TANDEM_FIBER_ASAN && !TANDEM_FIBER_TSAN
  // A fiber that overflows its stack is named, not a bare SIGSEGV.
  StackOverflowReporter reporter(config.stack_bytes);
  overflow = &reporter;
#endif
#if TANDEM_FIBER_TSAN
  tsan_home = __tsan_get_current_fiber();
#endif
  while (live > 0) {
    DrainRemote();
    // Timers need the clock: read it every 64 fibers run, and whenever
    // nothing is ready. A due timer fires at most that late.
    if (head == nullptr || ++since_fire >= 64) FireTimers();
    if (head != nullptr) {
      Fiber* f = head;
      head = f->next;
      if (head == nullptr) tail = nullptr;
      RunFiber(f);
      continue;
    }
    // Nothing to run: sleep until a remote wake-up or the next timer. The
    // wait is bounded by the earliest deadline (a second at most when no
    // fiber has a timer; fibers parked without one wait for an unpark).
    std::unique_lock<std::mutex> lock(mu);
    if (!remote.empty()) continue;
    const FiberDeadline until =
        timers.empty()
            ? std::chrono::steady_clock::now() + std::chrono::seconds(1)
            : std::min(
                  timers.front().deadline,
                  std::chrono::steady_clock::now() + std::chrono::seconds(1));
    idle = true;
    cv.wait_until(lock, until, [this] { return !remote.empty(); });
    idle = false;
  }
  overflow = nullptr;
  t_worker = nullptr;
}

// --------------------------------------------------------- FiberScheduler

FiberScheduler::FiberScheduler(const Config& config) : config_(config) {
  int n = config.workers;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(1, n);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<FiberWorker>(config_, i));
  }
}

FiberScheduler::~FiberScheduler() {
#if TANDEM_FIBER_TSAN
  for (const auto& f : fibers_) {
    if (f->tsan != nullptr) __tsan_destroy_fiber(f->tsan);
  }
#endif
}

absl::Status FiberScheduler::Spawn(std::function<void()> fn, int worker) {
  absl::StatusOr<std::unique_ptr<FiberStack>> stack =
      FiberStack::Create(config_.stack_bytes);
  if (!stack.ok()) return stack.status();
  auto f = std::make_unique<Fiber>();
  f->fn = std::move(fn);
  f->stack = *std::move(stack);
  const int64_t index =
      worker >= 0 && worker < static_cast<int>(workers_.size())
          ? worker
          : static_cast<int64_t>(fibers_.size() % workers_.size());
  FiberWorker* w = workers_[index].get();
  f->worker = w;
  MakeContext(f->context, *f->stack, &FiberEntry, f.get());
#if TANDEM_FIBER_TSAN
  f->tsan = __tsan_create_fiber(0);
#endif
  w->PushLocal(f.get());
  ++w->live;
  fibers_.push_back(std::move(f));
  return absl::OkStatus();
}

void FiberScheduler::Run() {
  // Workers are OS threads with the default stack: they only run the loop
  // (rank code runs on the fibers' stacks).
  std::vector<std::thread> threads;
  threads.reserve(workers_.size());
  for (const auto& w : workers_) {
    FiberWorker* worker = w.get();
    threads.emplace_back([worker] { worker->Loop(); });
  }
  for (std::thread& t : threads) t.join();
}

// -------------------------------------------------------------- functions

Fiber* CurrentFiber() {
  FiberWorker* w = t_worker;
  return w == nullptr ? nullptr : w->current;
}

void ParkCurrentFiber(FiberDeadline deadline) {
  Fiber* f = CurrentFiber();
  f->deadline = deadline;
  f->request = Fiber::Request::kPark;
  SwitchToWorker(f, /*exiting=*/false);
}

void YieldIfOnFiber() {
  if (CurrentFiber() != nullptr) YieldCurrentFiber();
}

void YieldCurrentFiber() {
  Fiber* f = CurrentFiber();
  f->request = Fiber::Request::kYield;
  SwitchToWorker(f, /*exiting=*/false);
}

namespace {

// Takes `f` out of kParked (true: the caller must queue it) or marks it
// notified.
bool MarkUnparked(Fiber* f) {
  int s = f->state.load(std::memory_order_acquire);
  for (;;) {
    switch (s) {
      case Fiber::kParked:
        if (f->state.compare_exchange_weak(s, Fiber::kRunnable,
                                           std::memory_order_acq_rel)) {
          return true;
        }
        break;
      case Fiber::kRunnable:
        if (f->state.compare_exchange_weak(s, Fiber::kNotified,
                                           std::memory_order_acq_rel)) {
          return false;
        }
        break;
      default:  // kNotified, kDone: nothing to do
        return false;
    }
  }
}

}  // namespace

void UnparkBatch::Unpark(Fiber* f) {
  if (!MarkUnparked(f)) return;
  FiberWorker* w = f->worker;
  if (t_worker == w) {
    w->PushLocal(f);
    return;
  }
  for (auto& [worker, fibers] : remote_) {
    if (worker == w) {
      fibers.push_back(f);
      // Hand over in chunks: waking thousands of fibers, the other workers
      // start on theirs while this thread goes on unparking.
      if (fibers.size() >= kUnparkChunk) {
        worker->PushRemote(fibers);
        fibers.clear();
      }
      return;
    }
  }
  remote_.push_back({w, {f}});
}

UnparkBatch::~UnparkBatch() {
  for (const auto& [worker, fibers] : remote_) {
    if (!fibers.empty()) worker->PushRemote(fibers);
  }
}

void UnparkFiber(Fiber* f) {
  if (MarkUnparked(f)) f->worker->Push(f);
}

}  // namespace tandem::sim::internal
