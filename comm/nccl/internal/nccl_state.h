// Internal to comm/nccl (the CUDA build): the state a rank's
// NcclCommunicator shares with its Works, and the Work itself. Not for use
// outside the nccl_*_cuda.cc files.
#ifndef TANDEM_COMM_NCCL_INTERNAL_NCCL_STATE_H_
#define TANDEM_COMM_NCCL_INTERNAL_NCCL_STATE_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/nccl/internal/nccl_support.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

// Everything a rank's communicator and its Works share. Used from the rank's
// thread only (see the header), so it needs no lock.
struct NcclCommunicator::State {
  int rank = 0;
  int size = 1;
  int device = 0;
  NcclOptions options;
  ncclComm_t comm = nullptr;
  cudaStream_t comm_stream = nullptr;
  cudaStream_t compute_stream = nullptr;  // legacy default stream until set
  cudaEvent_t ready = nullptr;            // reused: the wait captures it
  void* scratch = nullptr;                // one f32 for Barrier()
  // The device stream's clock read on the host's, for the timeline's device
  // track: a timing event that completed at host time `clock_host`
  // (InitResources records it on the idle stream; later, a timed operation's
  // end, so that cudaEventElapsedTime's float milliseconds stay within about
  // a microsecond). Null: device times are not available.
  std::shared_ptr<nccl_internal::Completion> clock;
  absl::Time clock_host = absl::InfinitePast();
  int64_t collectives = 0;
  std::map<int, int64_t> sends;  // per peer
  std::map<int, int64_t> recvs;
  std::vector<nccl_internal::PendingP2p> pending;
  bool aborted = false;
  absl::Status abort_cause;
  bool closed = false;
  // Where ncclCommSplit writes the child: NCCL's init job stores
  // it when the split completes, possibly after a timeout gave up on it, so it
  // lives as long as this state. Read only once the split completed.
  ncclComm_t split_child = nullptr;

  // "on rank 1 (cuda:1)"
  std::string On() const {
    return absl::StrCat("on rank ", rank, " (cuda:", device, ")");
  }
  std::string Full(absl::string_view name) const {
    return absl::StrCat("NCCL ", name, " on rank ", rank);
  }

  absl::Status SetDevice() const {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess)
      return nccl_internal::CudaError("cudaSetDevice", err, On());
    return absl::OkStatus();
  }

  // Aborts the NCCL communicator once; later operations fail with `cause`.
  void Abort(const absl::Status& cause) {
    if (aborted) return;
    aborted = true;
    abort_cause = cause;
    if (comm != nullptr) {
      (void)SetDevice();
      // Frees the communicator and stops its kernels; local, never waits
      // for peers. Its result cannot change what we report.
      (void)ncclCommAbort(comm);
      comm = nullptr;
    }
  }

  // Why a new operation cannot be issued, if it cannot.
  absl::Status Usable(OpKind op) const {
    if (closed) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL ", nccl_internal::Where(op, rank),
                       "the communicator was destroyed"));
    }
    if (aborted) {
      return absl::AbortedError(
          absl::StrCat("NCCL ", nccl_internal::Where(op, rank),
                       "the communicator was aborted earlier (",
                       abort_cause.message(), "); create a new communicator"));
    }
    return absl::OkStatus();
  }

  // The abort signal or an asynchronous NCCL error, if either says stop;
  // aborts the communicator when it does.
  absl::Status CheckHealth() {
    if (aborted) return abort_cause;
    if (options.abort_signal != nullptr && options.abort_signal->raised()) {
      Abort(options.abort_signal->cause());
      return abort_cause;
    }
    if (comm == nullptr) return absl::OkStatus();
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess) {
      Abort(nccl_internal::NcclError("ncclCommGetAsyncError", r, comm, On()));
      return abort_cause;
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      Abort(nccl_internal::NcclError(
          "an earlier NCCL operation (asynchronous error)", async, comm, On()));
      return abort_cause;
    }
    return absl::OkStatus();
  }

  // Non-blocking communicators answer ncclInProgress while NCCL finishes an
  // enqueue (connection setup, init): poll until it is done, with a deadline
  // and the abort signal. The caller aborts on error.
  absl::Status AwaitNccl(absl::string_view call, ncclResult_t r,
                         absl::Time deadline) {
    if (r != ncclSuccess && r != ncclInProgress) {
      return nccl_internal::NcclError(call, r, comm, On());
    }
    nccl_internal::Backoff backoff;
    while (true) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t q = ncclCommGetAsyncError(comm, &state);
      if (q != ncclSuccess)
        return nccl_internal::NcclError("ncclCommGetAsyncError", q, comm, On());
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress)
        return nccl_internal::NcclError(call, state, comm, On());
      if (options.abort_signal != nullptr && options.abort_signal->raised()) {
        return options.abort_signal->cause();
      }
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            call, " ", On(), " was still in progress after ",
            absl::FormatDuration(options.timeout),
            " (NcclOptions::timeout): a peer never joined or died"));
      }
      backoff.Pause();
    }
  }

  // Orders the communication stream after everything issued so far on the
  // compute stream.
  absl::Status OrderAfterCompute() {
    cudaError_t err = cudaEventRecord(ready, compute_stream);
    if (err != cudaSuccess) {
      return nccl_internal::CudaError(
          "cudaEventRecord on the compute stream (set_compute_stream must "
          "name a stream of this communicator's device)",
          err, On());
    }
    err = cudaStreamWaitEvent(comm_stream, ready, 0);
    if (err != cudaSuccess)
      return nccl_internal::CudaError("cudaStreamWaitEvent", err, On());
    return absl::OkStatus();
  }

  // Records the end of what was just launched on the communication stream.
  // `start` (a timing event from RecordStart, or null) is taken over; with
  // it, the end event is a timing event too.
  absl::StatusOr<std::shared_ptr<nccl_internal::Completion>> RecordCompletion(
      cudaEvent_t start = nullptr) {
    auto completion = std::make_shared<nccl_internal::Completion>();
    completion->start = start;
    cudaError_t err = cudaEventCreateWithFlags(
        &completion->event,
        start != nullptr ? cudaEventDefault : cudaEventDisableTiming);
    if (err != cudaSuccess) {
      completion->event = nullptr;
      return nccl_internal::CudaError("cudaEventCreateWithFlags", err, On());
    }
    err = cudaEventRecord(completion->event, comm_stream);
    if (err != cudaSuccess)
      return nccl_internal::CudaError("cudaEventRecord", err, On());
    return completion;
  }

  // A timing event recorded where the communication stream is now (before
  // a launch), or null when device times are not available or it fails:
  // the timeline then has no device span for the launch, nothing else
  // changes.
  cudaEvent_t RecordStart() {
    if (clock == nullptr) return nullptr;
    cudaEvent_t start = nullptr;
    if (cudaEventCreateWithFlags(&start, cudaEventDefault) != cudaSuccess) {
      return nullptr;
    }
    if (cudaEventRecord(start, comm_stream) != cudaSuccess) {
      cudaEventDestroy(start);
      return nullptr;
    }
    return start;
  }

  // When the stream ran a completed, timed launch, on the host's clock:
  // false when it was not timed or CUDA cannot say. Moves the clock's
  // reference to this launch's end once it is 10 s past the old one.
  bool DeviceSpan(const std::shared_ptr<nccl_internal::Completion>& c,
                  absl::Time& start, absl::Time& end) {
    if (clock == nullptr || c == nullptr || c->start == nullptr) return false;
    float to_start_ms = 0;
    float to_end_ms = 0;
    if (cudaEventElapsedTime(&to_start_ms, clock->event, c->start) !=
            cudaSuccess ||
        cudaEventElapsedTime(&to_end_ms, clock->event, c->event) !=
            cudaSuccess) {
      return false;
    }
    start = clock_host +
            absl::Microseconds(static_cast<int64_t>(to_start_ms * 1000.0));
    end = clock_host +
          absl::Microseconds(static_cast<int64_t>(to_end_ms * 1000.0));
    if (to_end_ms > 10000.0f) {
      clock = c;
      clock_host = end;
    }
    return true;
  }

  // Launches every queued Send/Recv as one NCCL group, in issue order.
  // Errors land in the tickets (and abort the communicator).
  void FlushP2p() {
    if (pending.empty()) return;
    std::vector<nccl_internal::PendingP2p> batch;
    batch.swap(pending);
    absl::Status status = [&]() -> absl::Status {
      if (aborted) return abort_cause;
      if (closed) {
        return absl::FailedPreconditionError("the communicator was destroyed");
      }
      TANDEM_RETURN_IF_ERROR(SetDevice());
      TANDEM_RETURN_IF_ERROR(OrderAfterCompute());
      const absl::Time deadline = nccl_internal::DeadlineAfter(options.timeout);
      absl::Status first;
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess)
        return nccl_internal::NcclError("ncclGroupStart", r, comm, On());
      for (const nccl_internal::PendingP2p& p : batch) {
        if (p.buf.count == 0) continue;  // every rank skips alike
        r = p.send ? ncclSend(p.buf.data, static_cast<size_t>(p.buf.count),
                              nccl_internal::ToNcclType(p.buf.dtype), p.peer,
                              comm, comm_stream)
                   : ncclRecv(p.buf.data, static_cast<size_t>(p.buf.count),
                              nccl_internal::ToNcclType(p.buf.dtype), p.peer,
                              comm, comm_stream);
        if (r != ncclSuccess && r != ncclInProgress && first.ok()) {
          first = nccl_internal::NcclError(p.send ? "ncclSend" : "ncclRecv", r,
                                           comm, On());
        }
      }
      // The group must be closed even after an error inside it.
      absl::Status end =
          AwaitNccl("ncclGroupEnd (Send/Recv batch)", ncclGroupEnd(), deadline);
      TANDEM_RETURN_IF_ERROR(first);
      return end;
    }();
    std::shared_ptr<nccl_internal::Completion> completion;
    if (status.ok()) {
      absl::StatusOr<std::shared_ptr<nccl_internal::Completion>> recorded =
          RecordCompletion();
      if (recorded.ok()) {
        completion = *std::move(recorded);
      } else {
        status = recorded.status();
      }
    }
    if (!status.ok() && !aborted) Abort(status);
    for (nccl_internal::PendingP2p& p : batch) {
      p.ticket->launched = true;
      p.ticket->launch_status = status;
      p.ticket->completion = completion;
    }
  }

  // Creates the communication stream, the `ready` event and the barrier
  // scratch word on `device` (made current). Create and Split call it
  // before the NCCL communicator exists.
  absl::Status InitResources();
  // Sets `clock` and `clock_host` (part of InitResources).
  absl::Status StartDeviceClock();

  // Best-effort release of everything; the communicator is finalised when
  // it drained in time, aborted otherwise. Idempotent.
  void Close();
};

namespace nccl_internal {

using State = NcclCommunicator::State;

// One in-flight operation (or a batch member). Owns nothing of the caller's.
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<State> state, std::string name,
           std::shared_ptr<Ticket> ticket, absl::Time deadline,
           WorkRecord record)
      : Work(std::move(record)),
        state_(std::move(state)),
        name_(std::move(name)),
        ticket_(std::move(ticket)),
        deadline_(deadline) {}

  bool IsCompleted() override {
    if (!done_) Poll();
    return done_;
  }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time give_up = DeadlineAfter(timeout);
    Backoff backoff;
    while (true) {
      Poll();
      if (done_) return status_;
      if (absl::Now() >= give_up) {
        return absl::DeadlineExceededError(absl::StrCat(
            state_->Full(name_), " still in flight after ",
            absl::FormatDuration(timeout), "; Wait again to keep waiting"));
      }
      backoff.Pause();
    }
  }

  absl::Status StreamWait(cudaStream_t stream) {
    if (!ticket_->launched) state_->FlushP2p();
    if (!ticket_->launch_status.ok() || done_) return absl::OkStatus();
    if (ticket_->completion == nullptr) return absl::OkStatus();
    cudaError_t err =
        cudaStreamWaitEvent(stream, ticket_->completion->event, 0);
    if (err != cudaSuccess) {
      return CudaError("cudaStreamWaitEvent (StreamWaitForWork)", err,
                       state_->On());
    }
    return absl::OkStatus();
  }

 private:
  void Finish(absl::Status status) {
    status_ = std::move(status);
    done_ = true;
    MarkEnded();
  }

  // Fails this Work and, unless it already is, aborts the communicator.
  void FailAndAbort(absl::Status status) {
    state_->Abort(status);
    Finish(std::move(status));
  }

  void Poll() {
    if (done_) return;
    // Launches queued Send/Recv, this Work's or not: waiting on anything
    // makes progress on everything issued before it.
    state_->FlushP2p();
    if (!ticket_->launch_status.ok()) {
      const absl::Status& s = ticket_->launch_status;
      Finish(absl::Status(
          s.code(), absl::StrCat(state_->Full(name_),
                                 " could not be launched: ", s.message())));
      return;
    }
    if (ticket_->completion == nullptr) {  // nothing to wait for
      Finish(absl::OkStatus());
      return;
    }
    // After an abort the kernels stop early and the event still fires: a
    // completed event proves nothing then.
    if (state_->aborted) {
      Finish(absl::AbortedError(absl::StrCat(
          state_->Full(name_), " was cut short: the communicator was aborted (",
          state_->abort_cause.message(), ")")));
      return;
    }
    cudaError_t q = cudaEventQuery(ticket_->completion->event);
    if (q == cudaSuccess) {
      // Sets the device span only when the launch was timed.
      WorkRecord& r = mutable_record();
      (void)state_->DeviceSpan(ticket_->completion, r.device_start,
                               r.device_end);
      Finish(absl::OkStatus());
      return;
    }
    if (q != cudaErrorNotReady) {
      FailAndAbort(CudaError(absl::StrCat("cudaEventQuery for ", name_), q,
                             state_->On()));
      return;
    }
    if (state_->closed) {
      Finish(absl::FailedPreconditionError(absl::StrCat(
          state_->Full(name_),
          ": the communicator was destroyed while the operation was in "
          "flight; wait for every Work before destroying it")));
      return;
    }
    if (absl::Status health = state_->CheckHealth(); !health.ok()) {
      Finish(absl::Status(
          health.code(),
          absl::StrCat(state_->Full(name_), " failed: ", health.message())));
      return;
    }
    if (absl::Now() >= deadline_) {
      FailAndAbort(absl::DeadlineExceededError(absl::StrCat(
          state_->Full(name_), " (cuda:", state_->device,
          ") did not complete within ",
          absl::FormatDuration(state_->options.timeout),
          " (NcclOptions::timeout) of being issued. The NCCL communicator was "
          "aborted (ncclCommAbort) so that a dead or diverged peer cannot hang "
          "the job; every later operation on it fails at once. Check that "
          "every rank issues the same collectives in the same order and that "
          "no rank died; create a new communicator to continue")));
    }
  }

  std::shared_ptr<State> state_;
  std::string name_;
  std::shared_ptr<Ticket> ticket_;
  absl::Time deadline_;
  bool done_ = false;
  absl::Status status_;
};

// A ticket whose launch already happened (collectives: launched at issue).
std::shared_ptr<Ticket> LaunchedTicket(std::shared_ptr<Completion> completion);

// kCuda, on `s.device`, and (with NcclOptions::check_pointers) really device
// memory there; InvalidArgument naming `name` otherwise.
absl::Status ValidateDeviceBuffer(OpKind op, absl::string_view name,
                                  const BufferView& buf, const State& s);

}  // namespace nccl_internal

// The nccl_*_cuda.cc files (the only includers) use these unqualified.
using nccl_internal::AvgFormatOf;
using nccl_internal::Backoff;
using nccl_internal::Completion;
using nccl_internal::CudaError;
using nccl_internal::CudaText;
using nccl_internal::DeadlineAfter;
using nccl_internal::LaunchedTicket;
using nccl_internal::NcclError;
using nccl_internal::NcclWork;
using nccl_internal::PendingP2p;
using nccl_internal::State;
using nccl_internal::Ticket;
using nccl_internal::ToNcclOp;
using nccl_internal::ToNcclType;
using nccl_internal::ValidateDeviceBuffer;
using nccl_internal::VisibleDevicesText;
using nccl_internal::Where;

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_INTERNAL_NCCL_STATE_H_
