// AbortSignal: a one-shot, thread-safe "the run is over" flag shared by the
// ranks of one process (the threads of RunOnLocalGpus).
//
// A rank whose function fails raises the signal with its error; every other
// rank's communicator sees it at its next poll (Work::Wait, IsCompleted,
// Synchronize), aborts its own NCCL communicator and fails the operation
// with kAborted naming the failed rank, instead of waiting for a peer that
// will never come.
//
//   auto signal = std::make_shared<comm::AbortSignal>();
//   comm->set_abort_signal(signal);           // on every rank
//   ...
//   signal->Raise(/*rank=*/2, status);          // rank 2 failed
//   if (signal->raised()) return signal->cause();   // kAborted, names rank 2
//
// The first Raise wins; later ones are ignored. raised() is a lock-free
// atomic load, cheap enough for every poll.
#ifndef TANDEM_COMM_NCCL_ABORT_SIGNAL_H_
#define TANDEM_COMM_NCCL_ABORT_SIGNAL_H_

#include <atomic>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"

namespace tandem::comm {

class AbortSignal {
 public:
  AbortSignal() = default;
  AbortSignal(const AbortSignal&) = delete;
  AbortSignal& operator=(const AbortSignal&) = delete;

  // Raises the signal because `rank` failed with `status` (not OK). Returns
  // true if this call raised it, false if it was raised already.
  bool Raise(int rank, const absl::Status& status);

  bool raised() const { return raised_.load(std::memory_order_acquire); }

  // OK while not raised; afterwards kAborted: "rank <r> failed: <status>".
  absl::Status cause() const;

 private:
  mutable std::mutex mu_;
  absl::Status cause_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> raised_{false};
};

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_ABORT_SIGNAL_H_
