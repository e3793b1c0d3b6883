// Fiber-local state: thread_local variables whose value belongs to the
// *rank* running on a thread rather than to the thread, so that they follow
// a user-space fiber (sim::Options::ranks = kFibers) from switch to switch.
//
// A file with such a variable registers it once, at static initialisation:
//
//   thread_local int t_rank = -1;
//   const bool kRankIsFiberLocal =
//       base::RegisterFiberLocal<int>([]() -> int& { return t_rank; }, -1);
//
// A fiber scheduler keeps one FiberLocals per fiber and calls Swap() on it
// when the fiber is switched in and again when it is switched out: every
// registered variable then holds the fiber's own value while the fiber runs
// and the thread's own value otherwise. A fresh fiber starts with the
// registered initial values (as a fresh thread would).
//
// Contract: register only rank-scoped state (which rank runs, autocast and
// grad mode, trace buffers, module labels, math tallies, allocator owners).
// Pure caches used inside one call that never yields to another fiber
// (matmul scratch, GEMM contexts, oneDNN engines, BLAS settings) stay per
// worker thread: they are not registered, and a fiber switch in the middle
// of them cannot happen because nothing in them waits for another rank.
//
// Thread safety: registration happens during static initialisation only
// (before main, single-threaded); Swap is called by the thread running the
// fiber. Cost: one indirect call per registered variable per switch.
#ifndef TANDEM_BASE_FIBER_LOCAL_H_
#define TANDEM_BASE_FIBER_LOCAL_H_

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace tandem::base {

namespace internal {

struct FiberLocalEntry {
  size_t size = 0;
  size_t align = 1;
  void (*construct)(void* storage, const void* initial) = nullptr;
  void (*destroy)(void* storage) = nullptr;
  // Exchanges this thread's value with *storage.
  void (*swap)(void* storage, const void* initial) = nullptr;
  const void* initial = nullptr;  // the registration's block (never freed)
};

// Adds `entry`; returns true. Static initialisation only.
bool AddFiberLocal(const FiberLocalEntry& entry);

}  // namespace internal

// Registers the thread_local that `ref()` names (a captureless lambda
// returning a reference to it) with the value a new fiber starts with.
// T must be copyable and swappable. Returns true (assign it to a namespace-
// scope constant so that it runs at static initialisation).
template <typename T>
bool RegisterFiberLocal(T& (*ref)(), T initial) {
  // The accessor is kept beside the initial value, so the entry's plain
  // function pointers can reach the variable.
  struct Block {
    T& (*ref)();
    T value;
  };
  internal::FiberLocalEntry e;
  e.size = sizeof(T);
  e.align = alignof(T);
  e.initial = new Block{ref, std::move(initial)};  // lives for the process
  e.construct = [](void* storage, const void* init) {
    new (storage) T(static_cast<const Block*>(init)->value);
  };
  e.destroy = [](void* storage) { static_cast<T*>(storage)->~T(); };
  e.swap = [](void* storage, const void* init) {
    using std::swap;
    swap(static_cast<const Block*>(init)->ref(), *static_cast<T*>(storage));
  };
  return internal::AddFiberLocal(e);
}

// One fiber's values of every registered fiber-local variable.
class FiberLocals {
 public:
  // Every variable at its registered initial value.
  FiberLocals();
  ~FiberLocals();
  FiberLocals(const FiberLocals&) = delete;
  FiberLocals& operator=(const FiberLocals&) = delete;

  // Exchanges the calling thread's values with these (switch in; the same
  // call again switches out).
  void Swap();

 private:
  std::unique_ptr<std::max_align_t[]> storage_;
};

// How many variables are registered (for tests).
int NumFiberLocals();

}  // namespace tandem::base

#endif  // TANDEM_BASE_FIBER_LOCAL_H_
