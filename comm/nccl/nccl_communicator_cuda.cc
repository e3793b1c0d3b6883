// NcclCommunicator over the CUDA runtime and NCCL (built when a toolkit with
// NCCL was found; see nccl_communicator_nocuda.cc for the other case).
//
// Flow of one collective (see the header for the contract):
//   validate (shared messages) -> make the device current -> launch queued
//   Send/Recv -> record `ready` on the compute stream, make the
//   communication stream wait for it -> NCCL call (+ Avg division kernel) on
//   the communication stream -> record a completion event -> NcclWork polls
//   that event, the communicator's async error, the abort signal and the
//   deadline.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/fingerprint.h"
#include "comm/nccl/internal/avg_kernel.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/split_plan.h"
#include "comm/validate.h"
#include "comm/work.h"

namespace tandem::comm {
namespace {

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes,
              "NcclUniqueId must hold exactly one ncclUniqueId");

std::string CudaText(cudaError_t err) {
  return absl::StrCat(cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

absl::Status CudaError(absl::string_view call, cudaError_t err,
                       absl::string_view where) {
  return absl::InternalError(
      absl::StrCat(call, " ", where, " failed: ", CudaText(err)));
}

absl::StatusCode NcclCode(ncclResult_t r) {
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclRemoteError:
    case ncclSystemError:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status NcclError(absl::string_view call, ncclResult_t r, ncclComm_t comm,
                       absl::string_view where) {
  std::string text =
      absl::StrCat(call, " ", where, " failed: ", ncclGetErrorString(r),
                   " (ncclResult ", static_cast<int>(r), ")");
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') {
    absl::StrAppend(&text, "; NCCL says: ", last);
  }
  if (r == ncclRemoteError || r == ncclSystemError) {
    absl::StrAppend(&text,
                    ". A peer process or the network failed; run "
                    "with NCCL_DEBUG=WARN for details");
  }
  return absl::Status(NcclCode(r), text);
}

std::string VisibleDevicesText() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  return env == nullptr ? std::string("CUDA_VISIBLE_DEVICES unset")
                        : absl::StrCat("CUDA_VISIBLE_DEVICES=\"", env, "\"");
}

ncclDataType_t ToNcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
  }
  return ncclUint8;  // unreachable: validated before
}

// Avg is Sum followed by a division (see the header), so it maps to ncclSum.
ncclRedOp_t ToNcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProd:
      return ncclProd;
  }
  return ncclSum;  // unreachable: validated before
}

int AvgFormatOf(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return nccl_internal::kAvgF64;
    case DType::kF16:
      return nccl_internal::kAvgF16;
    case DType::kBF16:
      return nccl_internal::kAvgBF16;
    default:
      return nccl_internal::kAvgF32;
  }
}

std::string Where(OpKind op, int rank) {
  return absl::StrCat(OpKindName(op), " on rank ", rank, ": ");
}

// Polling cadence of every bounded wait here: yield for the first 200 µs
// (collectives on small buffers finish in tens of µs), then nap, doubling
// from 20 µs to 1 ms, so a long wait costs the core almost nothing.
class Backoff {
 public:
  void Pause() {
    if (absl::Now() - start_ < absl::Microseconds(200)) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(nap_us_));
    nap_us_ = std::min(nap_us_ * 2, 1000);
  }

 private:
  absl::Time start_ = absl::Now();
  int nap_us_ = 20;
};

absl::Time DeadlineAfter(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                             : absl::Now() + timeout;
}

// The completion event of one launch; shared by every Work it covers (a
// batch of Send/Recv shares one).
struct Completion {
  cudaEvent_t event = nullptr;
  ~Completion() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

// Where a Work stands before it has a completion: Send/Recv are queued and
// launched later, together (FlushP2p).
struct Ticket {
  bool launched = false;
  absl::Status launch_status;  // the launch failed: the Work fails with it
  std::shared_ptr<Completion> completion;
};

struct PendingP2p {
  bool send = true;
  BufferView buf;
  int peer = 0;
  std::shared_ptr<Ticket> ticket;
};

}  // namespace

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
  int64_t collectives = 0;
  std::map<int, int64_t> sends;  // per peer
  std::map<int, int64_t> recvs;
  std::vector<PendingP2p> pending;
  bool aborted = false;
  absl::Status abort_cause;
  bool closed = false;
  // Where ncclCommSplit writes the child: NCCL's init job stores it when the
  // split completes, possibly after a timeout gave up on it, so it lives as
  // long as this state. Read only once the split completed.
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
    if (err != cudaSuccess) return CudaError("cudaSetDevice", err, On());
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
      return absl::FailedPreconditionError(absl::StrCat(
          "NCCL ", Where(op, rank), "the communicator was destroyed"));
    }
    if (aborted) {
      return absl::AbortedError(absl::StrCat(
          "NCCL ", Where(op, rank), "the communicator was aborted earlier (",
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
      Abort(NcclError("ncclCommGetAsyncError", r, comm, On()));
      return abort_cause;
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      Abort(NcclError("an earlier NCCL operation (asynchronous error)", async,
                      comm, On()));
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
      return NcclError(call, r, comm, On());
    }
    Backoff backoff;
    while (true) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t q = ncclCommGetAsyncError(comm, &state);
      if (q != ncclSuccess)
        return NcclError("ncclCommGetAsyncError", q, comm, On());
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) return NcclError(call, state, comm, On());
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
      return CudaError(
          "cudaEventRecord on the compute stream (set_compute_stream must "
          "name a stream of this communicator's device)",
          err, On());
    }
    err = cudaStreamWaitEvent(comm_stream, ready, 0);
    if (err != cudaSuccess) return CudaError("cudaStreamWaitEvent", err, On());
    return absl::OkStatus();
  }

  absl::StatusOr<std::shared_ptr<Completion>> RecordCompletion() {
    auto completion = std::make_shared<Completion>();
    cudaError_t err =
        cudaEventCreateWithFlags(&completion->event, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      completion->event = nullptr;
      return CudaError("cudaEventCreateWithFlags", err, On());
    }
    err = cudaEventRecord(completion->event, comm_stream);
    if (err != cudaSuccess) return CudaError("cudaEventRecord", err, On());
    return completion;
  }

  // Launches every queued Send/Recv as one NCCL group, in issue order.
  // Errors land in the tickets (and abort the communicator).
  void FlushP2p() {
    if (pending.empty()) return;
    std::vector<PendingP2p> batch;
    batch.swap(pending);
    absl::Status status = [&]() -> absl::Status {
      if (aborted) return abort_cause;
      if (closed) {
        return absl::FailedPreconditionError("the communicator was destroyed");
      }
      TANDEM_RETURN_IF_ERROR(SetDevice());
      TANDEM_RETURN_IF_ERROR(OrderAfterCompute());
      const absl::Time deadline = DeadlineAfter(options.timeout);
      absl::Status first;
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess) return NcclError("ncclGroupStart", r, comm, On());
      for (const PendingP2p& p : batch) {
        if (p.buf.count == 0) continue;  // every rank skips alike
        r = p.send
                ? ncclSend(p.buf.data, static_cast<size_t>(p.buf.count),
                           ToNcclType(p.buf.dtype), p.peer, comm, comm_stream)
                : ncclRecv(p.buf.data, static_cast<size_t>(p.buf.count),
                           ToNcclType(p.buf.dtype), p.peer, comm, comm_stream);
        if (r != ncclSuccess && r != ncclInProgress && first.ok()) {
          first = NcclError(p.send ? "ncclSend" : "ncclRecv", r, comm, On());
        }
      }
      // The group must be closed even after an error inside it.
      absl::Status end =
          AwaitNccl("ncclGroupEnd (Send/Recv batch)", ncclGroupEnd(), deadline);
      TANDEM_RETURN_IF_ERROR(first);
      return end;
    }();
    std::shared_ptr<Completion> completion;
    if (status.ok()) {
      absl::StatusOr<std::shared_ptr<Completion>> recorded = RecordCompletion();
      if (recorded.ok()) {
        completion = *std::move(recorded);
      } else {
        status = recorded.status();
      }
    }
    if (!status.ok() && !aborted) Abort(status);
    for (PendingP2p& p : batch) {
      p.ticket->launched = true;
      p.ticket->launch_status = status;
      p.ticket->completion = completion;
    }
  }

  // Creates the communication stream, the `ready` event and the barrier
  // scratch word on `device` (made current). Create and Split call it
  // before the NCCL communicator exists.
  absl::Status InitResources();

  // Best-effort release of everything; the communicator is finalised when
  // it drained in time, aborted otherwise. Idempotent.
  void Close();
};

namespace {

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

std::shared_ptr<Ticket> LaunchedTicket(std::shared_ptr<Completion> completion) {
  auto ticket = std::make_shared<Ticket>();
  ticket->launched = true;
  ticket->completion = std::move(completion);
  return ticket;
}

// kCuda, on `device`, and (optionally) really device memory there.
absl::Status ValidateDeviceBuffer(OpKind op, absl::string_view name,
                                  const BufferView& buf, const State& s) {
  TANDEM_RETURN_IF_ERROR(
      ValidateMemorySpace(op, name, buf, MemorySpace::kCuda, "nccl", s.rank));
  if (buf.device != s.device) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(op, s.rank), name, " is on cuda:", buf.device,
                     " but this NCCL communicator drives cuda:", s.device,
                     "; expected a buffer on cuda:", s.device,
                     " (each rank moves memory of its own device)"));
  }
  if (!s.options.check_pointers || buf.count == 0) return absl::OkStatus();
  cudaPointerAttributes attr;
  std::memset(&attr, 0, sizeof(attr));
  cudaError_t err = cudaPointerGetAttributes(&attr, buf.data);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, s.rank), name, " (", buf.DebugString(),
        ") is not memory CUDA knows (cudaPointerGetAttributes: ", CudaText(err),
        "); expected device memory of cuda:", s.device));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, s.rank), name, " is labelled ", buf.DebugString(),
        " but points to host memory; expected device memory of cuda:", s.device,
        ". Copy it to the device first"));
  }
  if (attr.type == cudaMemoryTypeDevice && attr.device != s.device) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(op, s.rank), name, " is labelled cuda:", buf.device,
                     " but its memory lives on cuda:", attr.device,
                     "; expected memory of cuda:", s.device));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status NcclCommunicator::State::InitResources() {
  TANDEM_RETURN_IF_ERROR(SetDevice());
  cudaError_t e =
      cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    comm_stream = nullptr;
    return CudaError("cudaStreamCreateWithFlags", e, On());
  }
  e = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    ready = nullptr;
    return CudaError("cudaEventCreateWithFlags", e, On());
  }
  e = cudaMallocAsync(&scratch, sizeof(float), comm_stream);
  if (e != cudaSuccess) {
    scratch = nullptr;
    return CudaError("cudaMallocAsync (barrier scratch)", e, On());
  }
  e = cudaMemsetAsync(scratch, 0, sizeof(float), comm_stream);
  if (e != cudaSuccess) return CudaError("cudaMemsetAsync", e, On());
  return absl::OkStatus();
}

void NcclCommunicator::State::Close() {
  if (closed) return;
  (void)SetDevice();
  if (!aborted && comm != nullptr) {
    FlushP2p();  // peers may be waiting for them
  }
  if (!aborted && comm != nullptr && comm_stream != nullptr) {
    // Drain: every issued operation must finish before finalising.
    absl::Status drained = [&]() -> absl::Status {
      TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Completion> c,
                              RecordCompletion());
      const absl::Time deadline = DeadlineAfter(options.timeout);
      Backoff backoff;
      while (true) {
        cudaError_t q = cudaEventQuery(c->event);
        if (q == cudaSuccess) return absl::OkStatus();
        if (q != cudaErrorNotReady) return CudaError("cudaEventQuery", q, On());
        TANDEM_RETURN_IF_ERROR(CheckHealth());
        if (absl::Now() >= deadline) {
          return absl::DeadlineExceededError(absl::StrCat(
              "destroying the NCCL communicator ", On(),
              ": its operations did not finish within the timeout"));
        }
        backoff.Pause();
      }
    }();
    if (!drained.ok()) Abort(drained);
  }
  if (!aborted && comm != nullptr) {
    absl::Status finalized =
        AwaitNccl("ncclCommFinalize", ncclCommFinalize(comm),
                  DeadlineAfter(options.timeout));
    if (finalized.ok()) {
      ncclResult_t r = ncclCommDestroy(comm);
      comm = nullptr;
      if (r != ncclSuccess) {
        aborted = true;
        abort_cause = NcclError("ncclCommDestroy", r, nullptr, On());
      }
    } else {
      Abort(finalized);
    }
  }
  if (scratch != nullptr) {
    cudaFreeAsync(scratch, comm_stream);
    scratch = nullptr;
  }
  if (ready != nullptr) {
    cudaEventDestroy(ready);
    ready = nullptr;
  }
  if (comm_stream != nullptr) {
    cudaStreamDestroy(comm_stream);  // returns at once; frees when idle
    comm_stream = nullptr;
  }
  closed = true;
}

absl::StatusOr<NcclUniqueId> NcclCommunicator::NewUniqueId() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    return NcclError("ncclGetUniqueId", r, nullptr, "(NewUniqueId)");
  }
  NcclUniqueId out;
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclUniqueId& id, int rank, int size, int device,
    const NcclOptions& options) {
  const std::string where =
      absl::StrCat("NcclCommunicator::Create(rank ", rank, " of ", size,
                   ", device ", device, "): ");
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(size));
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "rank must be in [0, ", size, "); found ", rank));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "NcclOptions::timeout must be positive; found ",
                     absl::FormatDuration(options.timeout)));
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (err != cudaSuccess) cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        where, "no usable CUDA device (",
        err != cudaSuccess ? CudaText(err) : "the driver sees no device", "; ",
        VisibleDevicesText(),
        "). Run on a machine with NVIDIA GPUs and a driver, or use the sim or "
        "mpi backend"));
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "device must be in [0, ", count, "): this process sees ", count,
        " CUDA device(s) (", VisibleDevicesText(), "); found ", device));
  }

  auto state = std::make_shared<State>();
  state->rank = rank;
  state->size = size;
  state->device = device;
  state->options = options;
  absl::Status made = [&]() -> absl::Status {
    TANDEM_RETURN_IF_ERROR(state->InitResources());

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    // Non-blocking: no NCCL call can hang the host (see the header).
    config.blocking = 0;
    ncclUniqueId nccl_id;
    std::memcpy(&nccl_id, id.data(), sizeof(nccl_id));
    ncclResult_t r =
        ncclCommInitRankConfig(&state->comm, size, nccl_id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      absl::Status s =
          NcclError("ncclCommInitRankConfig", r, state->comm, state->On());
      if (state->comm != nullptr) {
        (void)ncclCommAbort(state->comm);
        state->comm = nullptr;
      }
      return s;
    }
    absl::Status joined = state->AwaitNccl("ncclCommInitRankConfig", r,
                                           DeadlineAfter(options.timeout));
    if (!joined.ok()) {
      (void)ncclCommAbort(state->comm);
      state->comm = nullptr;
      if (joined.code() == absl::StatusCode::kDeadlineExceeded) {
        return absl::DeadlineExceededError(absl::StrCat(
            where, joined.message(), ". All ", size,
            " ranks must call Create with the same id before the timeout"));
      }
      return joined;
    }
    return absl::OkStatus();
  }();
  if (!made.ok()) {
    state->aborted = true;  // nothing to finalise
    state->abort_cause = made;
    state->Close();
    return made;
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(state)));
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<State> state)
    : state_(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() { state_->Close(); }

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }
CommDevice NcclCommunicator::device() const {
  return CommDevice::Cuda(state_->device);
}

void NcclCommunicator::set_compute_stream(CudaStreamHandle stream) {
  state_->compute_stream = static_cast<cudaStream_t>(stream.raw);
}
CudaStreamHandle NcclCommunicator::compute_stream() const {
  return CudaStreamHandle{state_->compute_stream};
}
CudaStreamHandle NcclCommunicator::communication_stream() const {
  return CudaStreamHandle{state_->comm_stream};
}

void NcclCommunicator::set_abort_signal(std::shared_ptr<AbortSignal> signal) {
  state_->options.abort_signal = std::move(signal);
}

absl::Status NcclCommunicator::MakeDeviceCurrent() const {
  return state_->SetDevice();
}

void NcclCommunicator::Abort(const absl::Status& cause) {
  state_->Abort(cause.ok()
                    ? absl::AbortedError(absl::StrCat(
                          "NcclCommunicator::Abort on rank ", state_->rank))
                    : cause);
}

bool NcclCommunicator::aborted() const { return state_->aborted; }
absl::Status NcclCommunicator::abort_cause() const {
  return state_->aborted ? state_->abort_cause : absl::OkStatus();
}

namespace {

// Issues one collective: orders it after the compute stream, runs `body` on
// the communication stream, records the completion. `name` is built only
// after the sequence number is taken.
std::unique_ptr<Work> LaunchCollective(
    const std::shared_ptr<State>& state, Fingerprint fp,
    const std::function<std::string(int64_t seq)>& name_of,
    const std::function<absl::Status(State&)>& body) {
  State& s = *state;
  const OpKind op = fp.op;
  if (absl::Status u = s.Usable(op); !u.ok()) {
    return MakeRejectedWork(u, fp, s.size);
  }
  if (absl::Status d = s.SetDevice(); !d.ok()) {
    return MakeRejectedWork(d, fp, s.size);
  }
  s.FlushP2p();  // queued Send/Recv were issued first
  if (absl::Status u = s.Usable(op); !u.ok()) {
    return MakeRejectedWork(u, fp, s.size);
  }
  // Not yet issued: a failure here leaves the sequence untouched.
  if (absl::Status o = s.OrderAfterCompute(); !o.ok()) {
    return MakeRejectedWork(o, fp, s.size);
  }
  const int64_t seq = s.collectives++;
  fp.seq = seq;
  WorkRecord record = StartRecord(fp, s.size);
  const std::string name = name_of(seq);
  const absl::Time deadline = DeadlineAfter(s.options.timeout);
  absl::Status issued = body(s);
  std::shared_ptr<Completion> completion;
  if (issued.ok()) {
    absl::StatusOr<std::shared_ptr<Completion>> c = s.RecordCompletion();
    if (c.ok()) {
      completion = *std::move(c);
    } else {
      issued = c.status();
    }
  }
  if (!issued.ok()) {
    // Half issued: peers cannot stay in step with us. Stop everyone.
    absl::Status failed(
        issued.code(),
        absl::StrCat(s.Full(name), " failed to launch: ", issued.message()));
    s.Abort(failed);
    return MakeCompletedWork(failed, std::move(record));
  }
  return std::make_unique<NcclWork>(state, name,
                                    LaunchedTicket(std::move(completion)),
                                    deadline, std::move(record));
}

absl::Status Divide(State& s, const BufferView& buf) {
  int e = nccl_internal::LaunchDivideInPlace(
      buf.data, buf.count, AvgFormatOf(buf.dtype), s.size, s.comm_stream);
  if (e != 0) {
    return CudaError("the Avg division kernel", static_cast<cudaError_t>(e),
                     s.On());
  }
  return absl::OkStatus();
}

absl::Time IssueDeadline(const State& s) {
  return DeadlineAfter(s.options.timeout);
}

}  // namespace

std::unique_ptr<Work> NcclCommunicator::AllReduce(BufferView buf, ReduceOp op) {
  State& s = *state_;
  absl::Status valid = ValidateAllReduce(buf, op, s.rank, s.size);
  if (valid.ok())
    valid = ValidateDeviceBuffer(OpKind::kAllReduce, "buf", buf, s);
  Fingerprint fp = MakeFingerprint(OpKind::kAllReduce, buf.dtype, buf.count);
  fp.reduce_op = op;
  if (!valid.ok()) return MakeRejectedWork(valid, fp, s.size);
  return LaunchCollective(
      state_, fp,
      [&](int64_t seq) {
        return absl::StrCat("AllReduce #", seq, " (", buf.DebugString(), ", ",
                            ReduceOpName(op), ")");
      },
      [&](State& st) -> absl::Status {
        if (buf.count == 0) return absl::OkStatus();
        TANDEM_RETURN_IF_ERROR(st.AwaitNccl(
            "ncclAllReduce",
            ncclAllReduce(buf.data, buf.data, static_cast<size_t>(buf.count),
                          ToNcclType(buf.dtype), ToNcclOp(op), st.comm,
                          st.comm_stream),
            IssueDeadline(st)));
        if (op == ReduceOp::kAvg) return Divide(st, buf);
        return absl::OkStatus();
      });
}

std::unique_ptr<Work> NcclCommunicator::Broadcast(BufferView buf, int root) {
  State& s = *state_;
  absl::Status valid = ValidateBroadcast(buf, root, s.rank, s.size);
  if (valid.ok())
    valid = ValidateDeviceBuffer(OpKind::kBroadcast, "buf", buf, s);
  Fingerprint fp = MakeFingerprint(OpKind::kBroadcast, buf.dtype, buf.count);
  fp.root = root;
  if (!valid.ok()) return MakeRejectedWork(valid, fp, s.size);
  return LaunchCollective(
      state_, fp,
      [&](int64_t seq) {
        return absl::StrCat("Broadcast #", seq, " (", buf.DebugString(),
                            ", root ", root, ")");
      },
      [&](State& st) -> absl::Status {
        if (buf.count == 0) return absl::OkStatus();
        return st.AwaitNccl(
            "ncclBroadcast",
            ncclBroadcast(buf.data, buf.data, static_cast<size_t>(buf.count),
                          ToNcclType(buf.dtype), root, st.comm, st.comm_stream),
            IssueDeadline(st));
      });
}

std::unique_ptr<Work> NcclCommunicator::AllGather(BufferView send,
                                                  BufferView recv) {
  State& s = *state_;
  absl::Status valid = ValidateAllGather(send, recv, s.rank, s.size);
  if (valid.ok())
    valid = ValidateDeviceBuffer(OpKind::kAllGather, "send", send, s);
  if (valid.ok())
    valid = ValidateDeviceBuffer(OpKind::kAllGather, "recv", recv, s);
  const Fingerprint fp =
      MakeFingerprint(OpKind::kAllGather, send.dtype, send.count);
  if (!valid.ok()) return MakeRejectedWork(valid, fp, s.size);
  return LaunchCollective(
      state_, fp,
      [&](int64_t seq) {
        return absl::StrCat("AllGather #", seq, " (", send.DebugString(), ")");
      },
      [&](State& st) -> absl::Status {
        if (send.count == 0) return absl::OkStatus();
        // In place exactly when send == recv + rank * count: NCCL's rule too.
        return st.AwaitNccl(
            "ncclAllGather",
            ncclAllGather(send.data, recv.data, static_cast<size_t>(send.count),
                          ToNcclType(send.dtype), st.comm, st.comm_stream),
            IssueDeadline(st));
      });
}

std::unique_ptr<Work> NcclCommunicator::ReduceScatter(BufferView send,
                                                      BufferView recv,
                                                      ReduceOp op) {
  State& s = *state_;
  absl::Status valid = ValidateReduceScatter(send, recv, op, s.rank, s.size);
  if (valid.ok()) {
    valid = ValidateDeviceBuffer(OpKind::kReduceScatter, "send", send, s);
  }
  if (valid.ok()) {
    valid = ValidateDeviceBuffer(OpKind::kReduceScatter, "recv", recv, s);
  }
  Fingerprint fp =
      MakeFingerprint(OpKind::kReduceScatter, recv.dtype, recv.count);
  fp.reduce_op = op;
  if (!valid.ok()) return MakeRejectedWork(valid, fp, s.size);
  return LaunchCollective(
      state_, fp,
      [&](int64_t seq) {
        return absl::StrCat("ReduceScatter #", seq, " (", send.DebugString(),
                            ", ", ReduceOpName(op), ")");
      },
      [&](State& st) -> absl::Status {
        if (recv.count == 0) return absl::OkStatus();
        TANDEM_RETURN_IF_ERROR(st.AwaitNccl(
            "ncclReduceScatter",
            ncclReduceScatter(
                send.data, recv.data, static_cast<size_t>(recv.count),
                ToNcclType(send.dtype), ToNcclOp(op), st.comm, st.comm_stream),
            IssueDeadline(st)));
        if (op == ReduceOp::kAvg) return Divide(st, recv);
        return absl::OkStatus();
      });
}

namespace {

std::unique_ptr<Work> QueueP2p(const std::shared_ptr<State>& state, bool send,
                               const BufferView& buf, int peer) {
  State& s = *state;
  const OpKind op = send ? OpKind::kSend : OpKind::kRecv;
  absl::Status valid = ValidatePointToPoint(op, buf, peer, s.rank, s.size);
  if (valid.ok()) valid = ValidateDeviceBuffer(op, "buf", buf, s);
  if (valid.ok()) valid = s.Usable(op);
  Fingerprint fp = MakeFingerprint(op, buf.dtype, buf.count);
  fp.peer = peer;
  if (!valid.ok()) return MakeRejectedWork(valid, fp, s.size);
  const int64_t seq = send ? s.sends[peer]++ : s.recvs[peer]++;
  fp.seq = seq;
  std::string name = absl::StrCat(send ? "Send #" : "Recv #", seq,
                                  send ? " to rank " : " from rank ", peer,
                                  " (", buf.DebugString(), ")");
  auto ticket = std::make_shared<Ticket>();
  s.pending.push_back(PendingP2p{send, buf, peer, ticket});
  return std::make_unique<NcclWork>(state, std::move(name), std::move(ticket),
                                    DeadlineAfter(s.options.timeout),
                                    StartRecord(fp, s.size));
}

}  // namespace

std::unique_ptr<Work> NcclCommunicator::Send(BufferView buf, int peer) {
  return QueueP2p(state_, /*send=*/true, buf, peer);
}

std::unique_ptr<Work> NcclCommunicator::Recv(BufferView buf, int peer) {
  return QueueP2p(state_, /*send=*/false, buf, peer);
}

absl::Status NcclCommunicator::Barrier() {
  const BufferView word{state_->scratch, 1, DType::kF32, MemorySpace::kCuda,
                        state_->device};
  std::unique_ptr<Work> work = LaunchCollective(
      state_, MakeFingerprint(OpKind::kBarrier, DType::kF32, 0),
      [](int64_t seq) { return absl::StrCat("Barrier #", seq); },
      [&](State& st) -> absl::Status {
        return st.AwaitNccl("ncclAllReduce (Barrier)",
                            ncclAllReduce(word.data, word.data, 1, ncclFloat32,
                                          ncclSum, st.comm, st.comm_stream),
                            IssueDeadline(st));
      });
  return work->Wait(absl::InfiniteDuration());  // bounded by the timeout
}

absl::Status NcclCommunicator::Synchronize() {
  State& s = *state_;
  if (s.closed) {
    return absl::FailedPreconditionError(
        absl::StrCat("NCCL Synchronize on rank ", s.rank,
                     ": the communicator was destroyed"));
  }
  TANDEM_RETURN_IF_ERROR(s.SetDevice());
  s.FlushP2p();
  if (s.aborted) {
    return absl::AbortedError(absl::StrCat("NCCL Synchronize on rank ", s.rank,
                                           ": the communicator was aborted (",
                                           s.abort_cause.message(), ")"));
  }
  absl::StatusOr<std::shared_ptr<Completion>> c = s.RecordCompletion();
  if (!c.ok()) return c.status();
  NcclWork work(
      state_,
      absl::StrCat("Synchronize (after ", s.collectives, " collectives)"),
      LaunchedTicket(*std::move(c)), DeadlineAfter(s.options.timeout),
      WorkRecord{});  // not an operation of the contract; never read
  return work.Wait(absl::InfiniteDuration());
}

namespace {

// Every rank's (color, key), all-gathered over `comm` through a temporary
// device buffer (NCCL moves device memory only): 2 int64 per rank.
absl::StatusOr<std::vector<int64_t>> GatherColorsAndKeys(NcclCommunicator& comm,
                                                         State& s, int color,
                                                         int key) {
  const std::vector<int64_t> mine = {color, key};
  const size_t n = static_cast<size_t>(s.size);
  std::vector<int64_t> all(2 * n);
  void* dev = nullptr;
  const size_t bytes = sizeof(int64_t) * (2 + 2 * n);
  cudaError_t e = cudaMallocAsync(&dev, bytes, s.comm_stream);
  if (e != cudaSuccess) {
    return CudaError("cudaMallocAsync (Split's colors and keys)", e, s.On());
  }
  auto* words = static_cast<int64_t*>(dev);
  absl::Status gathered = [&]() -> absl::Status {
    // Ordered before the all-gather: both run on the communication stream.
    cudaError_t c = cudaMemcpyAsync(words, mine.data(), 2 * sizeof(int64_t),
                                    cudaMemcpyHostToDevice, s.comm_stream);
    if (c != cudaSuccess) return CudaError("cudaMemcpyAsync", c, s.On());
    TANDEM_RETURN_IF_ERROR(
        comm.AllGather(
                BufferView{words, 2, DType::kI64, MemorySpace::kCuda, s.device},
                BufferView{words + 2, static_cast<int64_t>(2 * n), DType::kI64,
                           MemorySpace::kCuda, s.device})
            ->Wait(absl::InfiniteDuration()));  // bounded by the timeout
    // The all-gather completed: its result is in device memory.
    c = cudaMemcpy(all.data(), words + 2, 2 * n * sizeof(int64_t),
                   cudaMemcpyDeviceToHost);
    if (c != cudaSuccess) return CudaError("cudaMemcpy", c, s.On());
    return absl::OkStatus();
  }();
  cudaFreeAsync(dev, s.comm_stream);
  if (!gathered.ok()) return gathered;
  return all;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> NcclCommunicator::Split(int color,
                                                                      int key) {
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> child =
      SplitNccl(color, key);
  if (!child.ok()) return child.status();
  return std::unique_ptr<Communicator>(std::move(*child));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::SplitNccl(
    int color, int key) {
  State& s = *state_;
  const std::string where = absl::StrCat("NCCL Split on rank ", s.rank, ": ");
  if (s.closed || s.aborted) {
    return absl::Status(
        s.closed ? absl::StatusCode::kFailedPrecondition
                 : absl::StatusCode::kAborted,
        absl::StrCat(where, "the communicator was ",
                     s.closed ? "destroyed"
                              : absl::StrCat("aborted earlier (",
                                             s.abort_cause.message(), ")"),
                     "; split a live communicator"));
  }
  TANDEM_RETURN_IF_ERROR(s.SetDevice());
  // First a bounded, timed all-gather of (color, key): bad colors fail
  // every rank alike, naming the rank, and the membership (ties in key
  // broken by rank, as on every engine) is decided here, not by NCCL.
  absl::StatusOr<std::vector<int64_t>> all =
      GatherColorsAndKeys(*this, s, color, key);
  if (!all.ok()) {
    return absl::Status(
        all.status().code(),
        absl::StrCat(where, "exchanging colors and keys failed: ",
                     all.status().message()));
  }
  TANDEM_ASSIGN_OR_RETURN(SplitPlan plan, PlanFromGathered(s.rank, *all));
  if (s.aborted) return s.abort_cause;
  // The key passed to NCCL is the sub-rank decided above, so NCCL's order
  // is ours. A nullptr config: the child inherits the parent's (non-
  // blocking), so polling below bounds it.
  s.split_child = nullptr;
  const ncclResult_t r = ncclCommSplit(
      s.comm, plan.sub_rank < 0 ? NCCL_SPLIT_NOCOLOR : plan.color,
      plan.sub_rank < 0 ? 0 : plan.sub_rank, &s.split_child, nullptr);
  // The split runs as an asynchronous job of the parent: it is done when
  // the parent's async state leaves ncclInProgress.
  absl::Status split =
      s.AwaitNccl("ncclCommSplit", r, DeadlineAfter(s.options.timeout));
  if (!split.ok()) {
    absl::Status failed(
        split.code(),
        absl::StrCat(where, split.message(),
                     "; every rank of the communicator must call Split (the "
                     "parent is aborted: create a new one)"));
    s.Abort(failed);
    return failed;
  }
  if (plan.sub_rank < 0) return nullptr;
  auto child = std::make_shared<State>();
  child->rank = plan.sub_rank;
  child->size = static_cast<int>(plan.members.size());
  child->device = s.device;
  child->options = s.options;  // the timeout and the abort signal too
  child->compute_stream = s.compute_stream;
  child->comm = s.split_child;
  s.split_child = nullptr;
  absl::Status made = [&]() -> absl::Status {
    if (child->comm == nullptr) {
      return absl::InternalError(
          "ncclCommSplit completed without a communicator for a rank with a "
          "color");
    }
    TANDEM_RETURN_IF_ERROR(child->AwaitNccl("ncclCommSplit (the child)",
                                            ncclSuccess,
                                            DeadlineAfter(s.options.timeout)));
    int nccl_rank = -1, nccl_size = -1;
    ncclResult_t q = ncclCommUserRank(child->comm, &nccl_rank);
    if (q == ncclSuccess) q = ncclCommCount(child->comm, &nccl_size);
    if (q != ncclSuccess) {
      return NcclError("ncclCommUserRank", q, child->comm, child->On());
    }
    if (nccl_rank != child->rank || nccl_size != child->size) {
      return absl::InternalError(absl::StrCat(
          "NCCL made this rank ", nccl_rank, " of ", nccl_size,
          ", expected sub-rank ", child->rank, " of ", child->size));
    }
    return child->InitResources();
  }();
  if (!made.ok()) {
    absl::Status failed(made.code(), absl::StrCat(where, "color ", plan.color,
                                                  ": ", made.message()));
    child->Abort(failed);
    child->Close();
    return failed;
  }
  return std::unique_ptr<NcclCommunicator>(
      new NcclCommunicator(std::move(child)));
}

absl::Status StreamWaitForWork(Work& work, CudaStreamHandle stream) {
  auto* nccl = dynamic_cast<NcclWork*>(&work);
  if (nccl == nullptr) {
    if (work.IsCompleted()) return work.Wait(absl::ZeroDuration());
    return absl::InvalidArgumentError(
        "StreamWaitForWork: the Work does not come from a NcclCommunicator "
        "(and has not completed); wait for it on the host with Wait()");
  }
  return nccl->StreamWait(static_cast<cudaStream_t>(stream.raw));
}

}  // namespace tandem::comm
