// NcclCommunicator::State's resources and the Work's helpers (CUDA build).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "comm/nccl/internal/nccl_state.h"
#include "comm/nccl/internal/nccl_support.h"
#include "comm/validate.h"

namespace tandem::comm {
namespace nccl_internal {

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

}  // namespace nccl_internal

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
  return StartDeviceClock();
}

absl::Status NcclCommunicator::State::StartDeviceClock() {
  // A timing event on the (all but idle) stream, and the host time it
  // completed: the middle of the host times around its recording and the
  // query that saw it done.
  auto c = std::make_shared<Completion>();
  cudaError_t e = cudaEventCreateWithFlags(&c->event, cudaEventDefault);
  if (e != cudaSuccess) {
    c->event = nullptr;
    return CudaError("cudaEventCreateWithFlags (device clock)", e, On());
  }
  const absl::Time before = absl::Now();
  e = cudaEventRecord(c->event, comm_stream);
  if (e != cudaSuccess) return CudaError("cudaEventRecord", e, On());
  const absl::Time deadline = DeadlineAfter(options.timeout);
  while (true) {
    e = cudaEventQuery(c->event);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) return CudaError("cudaEventQuery", e, On());
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the communication stream ", On(),
                       " did not run its first event within the timeout"));
    }
  }
  const absl::Time after = absl::Now();
  clock = std::move(c);
  clock_host = before + (after - before) / 2;
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
  clock.reset();
  if (comm_stream != nullptr) {
    cudaStreamDestroy(comm_stream);  // returns at once; frees when idle
    comm_stream = nullptr;
  }
  closed = true;
}

}  // namespace tandem::comm
