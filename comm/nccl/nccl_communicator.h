// NcclCommunicator: the Communicator contract over NCCL, for real GPUs.
//
// One NcclCommunicator is one rank on one CUDA device. Two ways to build a
// world of them:
//   * one process driving every visible GPU, one thread per GPU:
//     RunOnLocalGpus (comm/nccl/local_gpus.h), the GPU twin of sim::Run;
//   * one process per GPU, on one node or many, bootstrapped over MPI:
//     CreateNcclCommunicatorFromMpi (comm/nccl/mpi_bootstrap.h).
// Both end in Create() below, which any other bootstrap can call too.
//
//   // Every rank, on its own thread or process:
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::NcclCommunicator> comm,
//                           comm::NcclCommunicator::Create(id, rank, size,
//                                                          /*device=*/rank));
//   // my_stream wrote `grads`:
//   comm->set_compute_stream(CudaStreamHandle{my_stream});
//   auto work = comm->AllReduce(grads_view /* MemorySpace::kCuda */,
//                               comm::ReduceOp::kAvg);
//   ... keep launching kernels on my_stream; the all-reduce overlaps ...
//   TANDEM_RETURN_IF_ERROR(work->Wait());        // host waits, or:
//   TANDEM_RETURN_IF_ERROR(
//       comm::StreamWaitForWork(*work, CudaStreamHandle{my_stream}));
//
// Streams. Each communicator owns a communication stream on its device
// (non-blocking with respect to the legacy default stream). Every operation
//   1. records an event on the compute stream (set_compute_stream; the
//      legacy default stream until set) and makes the communication stream
//      wait for it (cudaStreamWaitEvent): the data the compute stream wrote
//      before the call is what NCCL reads;
//   2. enqueues the NCCL call on the communication stream;
//   3. records a completion event there; the Work polls it.
// The host never synchronises with the GPU on this path: issuing returns as
// soon as the work is enqueued, so DDP's bucket all-reduces overlap the rest
// of backward exactly as on the sim backend. Work::IsCompleted() is one
// cudaEventQuery; Work::Wait() polls the event (yielding, then napping up to
// 1 ms) and StreamWaitForWork() hands the completion to another stream
// without blocking the host.
//
// Semantics, matching the sim reference (comm/communicator.h):
//   * Buffers must be CUDA device (or managed) memory on this communicator's
//     device, described by a BufferView with MemorySpace::kCuda and that
//     device ordinal. Host buffers, or buffers of another device, are
//     argument errors (already-failed Works) with the shared messages of
//     comm/validate.h. With NcclOptions::check_pointers the pointer itself is
//     also checked (cudaPointerGetAttributes), so a host pointer mislabelled
//     kCuda is an argument error rather than an illegal-address crash.
//   * dtypes map to ncclFloat32/64, ncclFloat16, ncclBfloat16, ncclInt32,
//     ncclInt64, ncclUint8; Sum, Max, Min, Prod to NCCL's own.
//   * Avg is ncclSum followed by a division by the world size in a small
//     kernel on the communication stream, in f32 for f16/bf16 and rounded
//     once: Sum / n exactly as sim and MPI compute it (ncclAvg pre-multiplies
//     every input by 1/n, which rounds differently).
//   * f16 and bf16 Sum/Prod/Max/Min are reduced by NCCL in 16-bit arithmetic,
//     so their rounding can differ from sim's "combine in f32, round once"
//     whenever an intermediate result is not representable; results that are
//     exact in 16 bits (as in the conformance suite) are identical.
//   * AllGather/ReduceScatter in place exactly when the contract allows it
//     (send == recv + rank * count, resp. recv == send + rank * count), which
//     is NCCL's own in-place rule.
//   * Send and Recv are not launched one by one: they are queued and launched
//     together, as one NCCL group, when this rank next issues a collective,
//     waits on or polls any Work, calls Synchronize() or is destroyed. So a
//     ring where every rank sends before it receives does not deadlock.
//     Operations otherwise run in issue order on the one communication
//     stream, as NCCL requires: the collectives of all ranks must be issued
//     in the same order, and a rank that waits on a Send before issuing the
//     collectives its peer issued first deadlocks (until the timeout).
//   * Operations on zero elements move nothing and complete on the
//     communication stream without calling NCCL (every rank skips alike).
//   * Barrier() is a 1-element all-reduce on a device scratch word, waited
//     like any Work (bounded by the timeout).
//   * Not checked, unlike sim: NCCL cannot see mismatched collectives across
//     ranks; a mismatch hangs or corrupts until the timeout aborts it.
//
// Timeouts and failure. NCCL communicators are created non-blocking
// (ncclConfig_t::blocking = 0), so no NCCL call can hang the host: whenever
// NCCL answers ncclInProgress (communicator init, lazy connection setup on a
// first operation), the communicator polls ncclCommGetAsyncError with a
// deadline. An operation that is not complete `NcclOptions::timeout` after
// it was issued, an asynchronous NCCL error (ncclCommGetAsyncError, checked
// on every poll), a CUDA error, or a raised AbortSignal (another rank of
// RunOnLocalGpus failed) aborts the communicator (ncclCommAbort) and fails
// the Work with a Status naming the operation and its sequence number, e.g.
//   "NCCL AllReduce #17 (f32[1024] cuda:1, sum) on rank 1 did not complete
//    within 5m; ..."
// Collectives are numbered per communicator from #0 in issue order, so the
// same number names the same collective on every rank; Send/Recv are
// numbered per peer ("Send #3 to rank 2"). After an abort every pending
// Work and every later operation fails at once (kAborted) with the cause;
// the communicator cannot be repaired: create a new one. The buffers of an
// aborted operation are unspecified.
//
// Thread-safety: a NcclCommunicator and its Works belong to one thread at a
// time (the rank's thread). Every call makes the communicator's device
// current on the calling thread first (cudaSetDevice).
//
// Built without CUDA (no toolkit, or TANDEM_NO_CUDA=1) the same API exists
// and every factory (Split included) returns kFailedPrecondition: "tandem was
// built without CUDA ...; install a CUDA toolkit with NCCL and rebuild".
#ifndef TANDEM_COMM_NCCL_NCCL_COMMUNICATOR_H_
#define TANDEM_COMM_NCCL_NCCL_COMMUNICATOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cuda_stream.h"
#include "comm/communicator.h"
#include "comm/front.h"
#include "comm/nccl/abort_signal.h"
#include "comm/types.h"
#include "comm/work.h"

namespace tandem::comm {

// ncclUniqueId as plain bytes (NCCL_UNIQUE_ID_BYTES), so headers need no
// NCCL include and bootstraps can ship it as a u8 buffer.
inline constexpr int kNcclUniqueIdBytes = 128;
using NcclUniqueId = std::array<uint8_t, kNcclUniqueIdBytes>;

struct NcclOptions {
  // Per-operation limit, from issue to completion; also bounds communicator
  // creation and destruction. Must be positive (InfiniteDuration allowed).
  absl::Duration timeout = absl::Minutes(5);
  // Check with cudaPointerGetAttributes that every buffer is device or
  // managed memory of this communicator's device (one driver call per
  // buffer; turn off only when profiling shows it).
  bool check_pointers = true;
  // Raised by a peer rank of the same process that failed; optional. See
  // comm/nccl/abort_signal.h.
  std::shared_ptr<AbortSignal> abort_signal;
};

class NcclCommunicator final : public PerOperationFront {
 public:
  // A fresh ncclUniqueId (ncclGetUniqueId) for a new world. Made once, by
  // one rank, and handed to every rank's Create().
  static absl::StatusOr<NcclUniqueId> NewUniqueId();

  // Joins world `id` as `rank` of `size` on CUDA device `device` (an
  // ordinal among the devices this process sees, i.e. after
  // CUDA_VISIBLE_DEVICES). Blocks until every rank has joined, at most
  // options.timeout (then fails with kDeadlineExceeded). Each rank of a
  // world must use a different device. Fails with kFailedPrecondition when
  // there is no usable device, kInvalidArgument for a bad rank, size,
  // device or timeout.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      const NcclUniqueId& id, int rank, int size, int device,
      const NcclOptions& options = {});

  // Flushes queued Send/Recv, waits (bounded by the timeout) for the
  // communication stream to drain and finalises the NCCL communicator;
  // aborts it instead if that does not finish in time. Pending Works fail
  // afterwards with kFailedPrecondition.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string_view backend() const override { return "nccl"; }
  // The CUDA device this rank drives: CommDevice::Cuda(ordinal).
  CommDevice device() const override;

  // The stream whose work each operation is ordered after ({} is the legacy
  // default stream). Must belong to device(). Takes effect for operations
  // issued afterwards.
  void set_compute_stream(CudaStreamHandle stream);
  CudaStreamHandle compute_stream() const;
  // The communicator's own stream, where NCCL runs.
  CudaStreamHandle communication_stream() const;

  // Replaces options.abort_signal (RunOnLocalGpus gives each run a fresh
  // one). nullptr clears it.
  void set_abort_signal(std::shared_ptr<AbortSignal> signal);

  // Makes device() current on the calling thread (cudaSetDevice).
  absl::Status MakeDeviceCurrent() const;

  // Flushes queued Send/Recv and waits until every operation issued so far
  // has completed on the GPU (bounded by the timeout, like a Work). The
  // launcher calls it when a rank's function returns.
  absl::Status Synchronize();

  // Aborts the NCCL communicator now (ncclCommAbort; local, never waits for
  // peers): its kernels stop, pending Works fail with kAborted, later
  // operations fail at once with `cause`. No-op if already aborted. The
  // launcher calls it for a rank whose function failed.
  void Abort(const absl::Status& cause);

  // Whether the communicator was aborted, and why (OK while it was not).
  bool aborted() const;
  absl::Status abort_cause() const;

  // Sub-communicators (see "Sub-communicators" in comm/communicator.h), by
  // ncclCommSplit (NCCL 2.18+). A collective of this communicator, issued in
  // order with its other collectives: first a bounded all-gather of every
  // rank's (color, key) through a small device buffer (so a bad color fails
  // every rank, naming it, and ties in key are broken by rank as on every
  // engine), then ncclCommSplit with the sub-rank so decided as NCCL's key,
  // polled until done (bounded by the timeout). The child is a full
  // NcclCommunicator on the same device with its own communication stream,
  // sequence numbers and abort state (splitShare off: an abort of one leaves
  // the other alone); it copies this one's options (timeout, pointer check,
  // abort signal) and compute stream. Errors: the all-gather's,
  // InvalidArgument for a color below kNoColor, a failed or timed-out
  // ncclCommSplit (which aborts this communicator too: NCCL cannot resume
  // a half-done split). Destroy the child before this communicator.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color,
                                                      int key) override;
  // The same, typed: the child as a NcclCommunicator (nullptr for
  // kNoColor), for callers that set its streams.
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> SplitNccl(int color,
                                                              int key);

  // Implementation state, shared with this communicator's Works (defined in
  // the .cc; opaque here so the header needs no CUDA or NCCL include).
  struct State;

 protected:
  // Buffers live on this rank's CUDA device.
  MemorySpace memory_space() const override { return MemorySpace::kCuda; }
  // Each buffer on device(), and really device memory there when
  // NcclOptions::check_pointers; Send/Recv also need a usable
  // communicator (not aborted or closed).
  absl::Status CheckOperation(const Operation& op) override;
  // Collectives launch on the communication stream after the compute
  // stream; Send/Recv are queued and flushed as one group.
  std::unique_ptr<Work> PostAllReduce(BufferView buf, ReduceOp op) override;
  std::unique_ptr<Work> PostBroadcast(BufferView buf, int root) override;
  std::unique_ptr<Work> PostAllGather(BufferView send,
                                      BufferView recv) override;
  std::unique_ptr<Work> PostReduceScatter(BufferView send, BufferView recv,
                                          ReduceOp op) override;
  std::unique_ptr<Work> PostSend(BufferView buf, int peer) override;
  std::unique_ptr<Work> PostRecv(BufferView buf, int peer) override;
  std::unique_ptr<Work> PostBarrier() override;

 private:
  explicit NcclCommunicator(std::shared_ptr<State> state);

  std::shared_ptr<State> state_;
};

// Makes `stream` (of the Work's device; {} is the legacy default stream)
// wait for `work` on the GPU, without blocking the
// host: later work on that stream sees the operation's results. `work` must
// come from a NcclCommunicator; a Work that already completed (e.g. an
// argument error) returns its status at once and adds no wait. Returns
// kInvalidArgument for a Work of another backend; an error of the operation
// itself still surfaces through Work::Wait().
absl::Status StreamWaitForWork(Work& work, CudaStreamHandle stream);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_NCCL_COMMUNICATOR_H_
