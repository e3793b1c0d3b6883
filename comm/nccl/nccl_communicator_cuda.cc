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
#include "base/trace/trace.h"
#include "comm/fingerprint.h"
#include "comm/nccl/internal/avg_kernel.h"
#include "comm/nccl/internal/nccl_state.h"
#include "comm/nccl/internal/nccl_support.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/split_plan.h"
#include "comm/validate.h"
#include "comm/work.h"

namespace tandem::comm {

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes,
              "NcclUniqueId must hold exactly one ncclUniqueId");

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
  // The timeline's device track: when the stream reaches and finishes it.
  cudaEvent_t start = trace::Enabled() ? s.RecordStart() : nullptr;
  absl::Status issued = body(s);
  std::shared_ptr<Completion> completion;
  if (issued.ok()) {
    absl::StatusOr<std::shared_ptr<Completion>> c = s.RecordCompletion(start);
    start = nullptr;  // the completion owns it now, even on failure
    if (c.ok()) {
      completion = *std::move(c);
    } else {
      issued = c.status();
    }
  }
  if (start != nullptr) cudaEventDestroy(start);
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

std::unique_ptr<Work> NcclCommunicator::PostAllReduce(BufferView buf,
                                                      ReduceOp op) {
  Fingerprint fp = MakeFingerprint(OpKind::kAllReduce, buf.dtype, buf.count);
  fp.reduce_op = op;
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

std::unique_ptr<Work> NcclCommunicator::PostBroadcast(BufferView buf,
                                                      int root) {
  Fingerprint fp = MakeFingerprint(OpKind::kBroadcast, buf.dtype, buf.count);
  fp.root = root;
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

std::unique_ptr<Work> NcclCommunicator::PostAllGather(BufferView send,
                                                      BufferView recv) {
  const Fingerprint fp =
      MakeFingerprint(OpKind::kAllGather, send.dtype, send.count);
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

std::unique_ptr<Work> NcclCommunicator::PostReduceScatter(BufferView send,
                                                          BufferView recv,
                                                          ReduceOp op) {
  Fingerprint fp =
      MakeFingerprint(OpKind::kReduceScatter, recv.dtype, recv.count);
  fp.reduce_op = op;
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
  Fingerprint fp = MakeFingerprint(op, buf.dtype, buf.count);
  fp.peer = peer;
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

absl::Status NcclCommunicator::CheckOperation(const Operation& op) {
  State& s = *state_;
  const bool two_buffers =
      op.fp.op == OpKind::kAllGather || op.fp.op == OpKind::kReduceScatter;
  if (op.fp.op == OpKind::kBarrier) return absl::OkStatus();
  TANDEM_RETURN_IF_ERROR(
      ValidateDeviceBuffer(op.fp.op, two_buffers ? "send" : "buf", op.buf, s));
  if (two_buffers) {
    TANDEM_RETURN_IF_ERROR(ValidateDeviceBuffer(op.fp.op, "recv", op.recv, s));
  }
  if (op.fp.op == OpKind::kSend || op.fp.op == OpKind::kRecv) {
    return s.Usable(op.fp.op);
  }
  return absl::OkStatus();
}

std::unique_ptr<Work> NcclCommunicator::PostSend(BufferView buf, int peer) {
  return QueueP2p(state_, /*send=*/true, buf, peer);
}

std::unique_ptr<Work> NcclCommunicator::PostRecv(BufferView buf, int peer) {
  return QueueP2p(state_, /*send=*/false, buf, peer);
}

std::unique_ptr<Work> NcclCommunicator::PostBarrier() {
  const BufferView word{state_->scratch, 1, DType::kF32, MemorySpace::kCuda,
                        state_->device};
  return LaunchCollective(
      state_, MakeFingerprint(OpKind::kBarrier, DType::kF32, 0),
      [](int64_t seq) { return absl::StrCat("Barrier #", seq); },
      [&](State& st) -> absl::Status {
        return st.AwaitNccl("ncclAllReduce (Barrier)",
                            ncclAllReduce(word.data, word.data, 1, ncclFloat32,
                                          ncclSum, st.comm, st.comm_stream),
                            IssueDeadline(st));
      });
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
