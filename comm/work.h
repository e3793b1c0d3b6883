// Work: the handle of one in-flight operation (PyTorch c10d's Work).
//
// Every Communicator operation returns at once with a Work; the operation
// completes later. Errors surface only through Wait(): there is one error
// channel. An argument error found when the operation is issued comes back as
// a Work that is already completed and whose Wait() returns the error.
//
//   std::unique_ptr<comm::Work> work =
//       comm.AllReduce(buf, comm::ReduceOp::kSum);
//   ...                                    // other work; `buf` untouched
//   TANDEM_RETURN_IF_ERROR(work->Wait());  // `buf` now holds the sum
//
// Thread-safety: a Work belongs to the rank (thread) that issued it; call its
// methods from one thread at a time.
#ifndef TANDEM_COMM_WORK_H_
#define TANDEM_COMM_WORK_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem::comm {

class Work {
 public:
  virtual ~Work() = default;

  // True once the operation has finished, successfully or not; Wait() then
  // returns without blocking. Never blocks. Backends may use the call to make
  // a bounded amount of progress.
  virtual bool IsCompleted() = 0;

  // Blocks until the operation completes or `timeout` passes.
  //   OK: completed; the output buffers hold the result and the input
  //       buffers are no longer read.
  //   kDeadlineExceeded because `timeout` passed: the operation is still in
  //       flight (the Work may be waited again); each backend also enforces
  //       its own per-operation timeout, after which the operation fails.
  //   any other error: the operation failed; output buffers are unspecified.
  // Once completed, every further Wait() returns the same status.
  virtual absl::Status Wait(
      absl::Duration timeout = absl::InfiniteDuration()) = 0;
};

// A Work that has already completed with `status` (an enqueue-time error, or
// a trivially finished operation when `status` is OK).
std::unique_ptr<Work> MakeCompletedWork(absl::Status status = absl::OkStatus());

}  // namespace tandem::comm

#endif  // TANDEM_COMM_WORK_H_
