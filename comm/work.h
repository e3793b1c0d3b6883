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
// Every Work carries a WorkRecord (what, which number, how many bytes, when),
// the one source a timeline, a timeout message and a benchmark read:
//
//   const comm::WorkRecord& r = work->record();
//   // r.fp.DebugString() == "#12 AllReduce(f32 x 1024, sum)", r.bytes == 4096
//   // r.end - r.start: issue to observed completion.
//
// Thread-safety: a Work belongs to the rank (thread) that issued it; call its
// methods from one thread at a time.
#ifndef TANDEM_COMM_WORK_H_
#define TANDEM_COMM_WORK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"

namespace tandem::comm {

// What one Work did. Filled by the engine at issue; `end` when the rank
// observes completion.
struct WorkRecord {
  // The operation, its sequence number (fp.seq: the rank's collective number,
  // or the message number on its (sender, receiver) pair; -1 for an operation
  // rejected at issue, which does not count), dtype, count, root
  // (Broadcast), reduce op and peer (Send/Recv).
  Fingerprint fp;
  // The payload in bytes, as nccl-tests' "size": the buffer for AllReduce,
  // Broadcast, Send and Recv; the recv buffer for AllGather; the send buffer
  // for ReduceScatter; 0 for Barrier.
  int64_t bytes = 0;
  // When the operation was issued (Communicator call).
  absl::Time start = absl::InfinitePast();
  // When this rank first saw it complete (IsCompleted() true or Wait()
  // returning its final status); absl::InfiniteFuture() until then.
  absl::Time end = absl::InfiniteFuture();

  // Engines that run operations on a device stream (nccl, when the timeline
  // is recording at issue) also say when the stream itself began and
  // finished the operation, on the host's clock; absl::InfinitePast() when
  // unknown (every other engine, or the device timing failed).
  absl::Time device_start = absl::InfinitePast();
  absl::Time device_end = absl::InfinitePast();

  bool completed() const { return end != absl::InfiniteFuture(); }
  bool has_device_span() const {
    return device_start != absl::InfinitePast() &&
           device_end != absl::InfinitePast();
  }
  // "#12 AllReduce(f32 x 1024, sum), 4096 bytes, 1.2ms" or
  // "..., in flight for 3s".
  std::string DebugString() const;
};

// The wall clock of Work records: absl::Now()'s time, read the cheaper of
// two ways on this machine (CLOCK_REALTIME through the vDSO, or absl::Now()
// itself; measured once per process). Every operation reads it twice (start
// and end): with the kernel's "tsc" clock source the vDSO read saves 60 of
// the ~500 ns of an 8-byte all-reduce between two sim ranks.
absl::Time RecordClockNow();

// The record of operation `fp` issued now (start = RecordClockNow()) in a world
// of `world_size` ranks; bytes follow from fp's dtype and count as
// WorkRecord::bytes says.
WorkRecord StartRecord(const Fingerprint& fp, int world_size);

class Work {
 public:
  virtual ~Work() = default;

  // What this operation is and when it ran (see WorkRecord). `end` is set by
  // the IsCompleted()/Wait() call that first observes completion.
  const WorkRecord& record() const { return record_; }

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

 protected:
  Work() = default;
  explicit Work(WorkRecord record) : record_(std::move(record)) {}
  // Engines call this when they observe completion; only the first call
  // counts.
  void MarkEnded() {
    if (!record_.completed()) record_.end = RecordClockNow();
  }
  WorkRecord& mutable_record() { return record_; }

 private:
  WorkRecord record_;
};

// A Work that has already completed with `status` (an enqueue-time error, or
// a trivially finished operation when `status` is OK). `record` says what it
// was (an operation rejected at issue has fp.seq == -1); its end is set to
// now (and its start too, if unset).
std::unique_ptr<Work> MakeCompletedWork(absl::Status status = absl::OkStatus(),
                                        WorkRecord record = {});

// The already-failed Work of an operation rejected at issue (an argument
// error): its record has `fp` with seq -1 (it does not count as issued).
std::unique_ptr<Work> MakeRejectedWork(absl::Status status, Fingerprint fp,
                                       int world_size);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_WORK_H_
