// RankThread: a joinable thread with a chosen stack size, for the simulated
// cluster's ranks. std::thread always takes the process default (8 MiB of
// address space on Linux, RLIMIT_STACK); 8192 ranks of that reserve 64 GiB
// of address space and a map entry pair each. Only the pages a rank touches
// cost memory either way, but a small explicit stack bounds what a rank can
// use and keeps a deep recursion from going unnoticed.
//
//   absl::StatusOr<std::unique_ptr<RankThread>> t =
//       RankThread::Start([] { ... }, /*stack_bytes=*/512 << 10);
//   if (t.ok()) (*t)->Join();
//
// Not thread-safe: one owner starts and joins it. The destructor joins a
// thread not yet joined (never detaches).
#ifndef TANDEM_SIM_RANK_THREAD_H_
#define TANDEM_SIM_RANK_THREAD_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"

namespace tandem::sim::internal {

class RankThread {
 public:
  // Starts `fn` on a new thread whose stack is `stack_bytes` (rounded up to
  // whole pages; 0: the system default). Fails (kResourceExhausted, or
  // kInvalidArgument for a stack too small for this program's thread-local
  // storage) naming the size, without starting anything.
  static absl::StatusOr<std::unique_ptr<RankThread>> Start(
      std::function<void()> fn, int64_t stack_bytes);

  ~RankThread();
  RankThread(const RankThread&) = delete;
  RankThread& operator=(const RankThread&) = delete;

  // Blocks until the function has returned. Idempotent.
  void Join();

 private:
  struct State;
  explicit RankThread(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_RANK_THREAD_H_
