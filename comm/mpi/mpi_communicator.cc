#include "comm/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "base/dtype.h"
#include "comm/fingerprint.h"
#include "comm/mpi/internal/mpi_work.h"
#include "comm/split_plan.h"
#include "comm/validate.h"

namespace tandem::comm {
namespace {

using mpi_internal::CollectiveCheck;
using mpi_internal::MpiError;
using mpi_internal::MpiWork;
using mpi_internal::WaitPolicy;

// The MPI datatype that moves `dtype` bit for bit (f16/bf16 as 16-bit words).
MPI_Datatype MoveType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    case DType::kU8:
      return MPI_UINT8_T;
    case DType::kF16:
    case DType::kBF16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op ToMpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kProd:
      return MPI_PROD;
    case ReduceOp::kTreeSum:
      break;  // rejected by the front: MPI has no fixed-order sum
  }
  return MPI_OP_NULL;
}

// Divides `count` elements of a floating dtype by `divisor` in place.
void DivideInPlace(DType dtype, void* data, int64_t count, int divisor) {
  if (dtype == DType::kF64) {
    auto* p = static_cast<double*>(data);
    for (int64_t i = 0; i < count; ++i) p[i] /= divisor;
  } else {
    auto* p = static_cast<float*>(data);
    const float d = static_cast<float>(divisor);
    for (int64_t i = 0; i < count; ++i) p[i] /= d;
  }
}

bool Overlaps(const BufferView& a, const BufferView& b) {
  const char* a0 = static_cast<const char*>(a.data);
  const char* b0 = static_cast<const char*>(b.data);
  return a.count > 0 && b.count > 0 && a0 < b0 + b.bytes() &&
         b0 < a0 + a.bytes();
}

// MPI counts are int; larger buffers would need derived datatypes.
absl::Status CheckCount(absl::string_view op, int64_t count, int rank) {
  if (count > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, " on rank ", rank, ": ", count,
        " elements exceed the MPI backend's limit of 2^31 - 1 per call; "
        "split the buffer"));
  }
  return absl::OkStatus();
}

// Sets OpenMPI's coll_libnbc_iallreduce_algorithm to 1 (ring) through the
// MPI tool interface; see MpiOptions::ring_iallreduce. Best effort: any
// failure (another MPI, an OpenMPI without the variable) leaves MPI's
// default, which is correct, only slower.
void PreferRingIallreduce() {
  if (std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr) {
    return;  // the user chose
  }
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    return;
  }
  int index = -1;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) ==
      MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) ==
        MPI_SUCCESS) {
      if (count == 1) {
        const int ring = 1;
        MPI_T_cvar_write(handle, &ring);
      }
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
}

}  // namespace

bool CheckCollectivesEnabled(const MpiOptions& options) {
  return CollectiveCheckRequested(options.check_collectives);
}

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm check_comm = MPI_COMM_NULL;  // fingerprints only
  bool initialized_mpi = false;
  MpiOptions options;
  std::unique_ptr<CollectiveCheck> check;  // null when the check is off
  int64_t sequence = 0;                    // collectives issued
  std::vector<int64_t> sends_to;           // messages issued to each peer
  std::vector<int64_t> recvs_from;         // messages issued from each peer

  WaitPolicy policy(int rank) const {
    return {.rank = rank,
            .timeout = options.timeout,
            .stall_note_interval = options.stall_note_interval};
  }
  // Issues `launch` as a checked collective (or at once when the check is
  // off) and returns its Work.
  std::unique_ptr<Work> Collective(int rank, int size, const Fingerprint& fp,
                                   MpiWork::Launch launch) {
    Fingerprint numbered = fp;
    numbered.seq = sequence++;
    auto work =
        std::make_unique<MpiWork>(StartRecord(numbered, size), policy(rank));
    work->Start(std::move(launch), check.get());
    return work;
  }
  // Send (op == kSend) or Recv of `buf` with `peer` (checked by the front):
  // numbered per peer, never checked (MPI matches them by pair and order).
  std::unique_ptr<Work> PointToPoint(OpKind op, BufferView buf, int peer,
                                     int rank, int size) {
    const bool send = op == OpKind::kSend;
    Fingerprint fp = MakeFingerprint(op, buf.dtype, buf.count);
    fp.peer = peer;
    fp.seq = send ? sends_to[peer]++ : recvs_from[peer]++;
    auto work = std::make_unique<MpiWork>(StartRecord(fp, size), policy(rank));
    MPI_Comm mpi_comm = comm;
    work->Start(
        [=](MpiWork& w) -> absl::Status {
          MPI_Request request;
          const int n = static_cast<int>(buf.count);
          int rc = send ? MPI_Isend(buf.data, n, MoveType(buf.dtype), peer,
                                    /*tag=*/0, mpi_comm, &request)
                        : MPI_Irecv(buf.data, n, MoveType(buf.dtype), peer,
                                    /*tag=*/0, mpi_comm, &request);
          if (rc != MPI_SUCCESS)
            return MpiError(send ? "MPI_Isend" : "MPI_Irecv", rc, rank);
          w.AddRequest(request);
          return absl::OkStatus();
        },
        /*check=*/nullptr);
    return work;
  }
};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(
    const MpiOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "MpiCommunicator: timeout must be positive");
  }
  if (options.stall_note_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "MpiCommunicator: stall_note_interval must be zero (off) or positive");
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return absl::FailedPreconditionError(
        "MpiCommunicator: MPI was already finalised in this process; create "
        "the communicator before MPI_Finalize");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Init_thread", rc, -1);
    impl->initialized_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (impl->initialized_mpi) MPI_Finalize();
    return absl::FailedPreconditionError(absl::StrCat(
        "MpiCommunicator: the MPI library provides thread level ", provided,
        " but tandem needs MPI_THREAD_SERIALIZED (", MPI_THREAD_SERIALIZED,
        "); use an MPI built with thread support (OpenMPI's default is) or "
        "initialise MPI with MPI_Init_thread(MPI_THREAD_SERIALIZED)"));
  }
  if (options.ring_iallreduce) PreferRingIallreduce();
  // A private communicator: our traffic never matches the application's.
  MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm);
  // Errors come back as codes we turn into Status, not job aborts.
  MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
  // Ranks may disagree on the check (an environment variable set on some
  // ranks only): it is on when any rank asks for it, so every rank issues
  // the same fingerprint exchanges.
  int check = CheckCollectivesEnabled(options) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &check, 1, MPI_INT, MPI_MAX, impl->comm);
  if (check) {
    MPI_Comm_dup(MPI_COMM_WORLD, &impl->check_comm);
    MPI_Comm_set_errhandler(impl->check_comm, MPI_ERRORS_RETURN);
  }
  return Wrap(std::move(impl));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::Wrap(
    std::unique_ptr<Impl> impl) {
  auto comm =
      std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(impl)));
  MPI_Comm_rank(comm->impl_->comm, &comm->rank_);
  MPI_Comm_size(comm->impl_->comm, &comm->size_);
  MPI_Comm local;
  MPI_Comm_split_type(comm->impl_->comm, MPI_COMM_TYPE_SHARED, comm->rank_,
                      MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &comm->local_rank_);
  MPI_Comm_size(local, &comm->local_size_);
  MPI_Comm_free(&local);
  Impl& impl_ref = *comm->impl_;
  impl_ref.sends_to.assign(comm->size_, 0);
  impl_ref.recvs_from.assign(comm->size_, 0);
  if (impl_ref.check_comm != MPI_COMM_NULL) {
    impl_ref.check = std::make_unique<CollectiveCheck>(
        impl_ref.check_comm, comm->rank_, comm->size_);
  }
  return comm;
}

absl::StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::Split(int color,
                                                                     int key) {
  // Bounded first: a checked, timed all-gather of (color, key). Only when
  // every rank has reached Split does the blocking MPI_Comm_split run, so it
  // cannot wait on a rank that never comes.
  absl::StatusOr<SplitPlan> plan = PlanSplit(*this, color, key);
  if (!plan.ok()) return plan.status();
  MPI_Comm sub = MPI_COMM_NULL;
  int rc = MPI_Comm_split(impl_->comm,
                          color == kNoColor ? MPI_UNDEFINED : color, key, &sub);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Comm_split", rc, rank_);
  if (sub == MPI_COMM_NULL) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->options = impl_->options;
  impl->comm = sub;
  MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
  // The parent's ranks agreed on the check; its sub-communicators follow.
  if (impl_->check != nullptr) {
    MPI_Comm_dup(sub, &impl->check_comm);
    MPI_Comm_set_errhandler(impl->check_comm, MPI_ERRORS_RETURN);
  }
  return std::unique_ptr<Communicator>(Wrap(std::move(impl)));
}

MpiCommunicator::~MpiCommunicator() {
  impl_->check.reset();
  if (impl_->check_comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->check_comm);
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
  if (impl_->initialized_mpi) MPI_Finalize();
}

std::unique_ptr<Work> MpiCommunicator::PostAllReduce(BufferView buf,
                                                     ReduceOp op) {
  Fingerprint fp = MakeFingerprint(OpKind::kAllReduce, buf.dtype, buf.count);
  fp.reduce_op = op;
  MPI_Comm mpi_comm = impl_->comm;
  const int rank = rank_;
  const int n = size_;
  return impl_->Collective(
      rank_, size_, fp, [=](MpiWork& work) -> absl::Status {
        void* data = buf.data;
        MPI_Datatype type = MoveType(buf.dtype);
        if (Is16BitFloat(buf.dtype)) {
          work.scratch().resize(buf.count);
          Widen16BitFloats(buf.dtype, buf.data, work.scratch().data(),
                           buf.count);
          data = work.scratch().data();
          type = MPI_FLOAT;
        }
        MPI_Request request;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(buf.count),
                                type, ToMpiOp(op), mpi_comm, &request);
        if (rc != MPI_SUCCESS) return MpiError("MPI_Iallreduce", rc, rank);
        work.AddRequest(request);
        MpiWork* raw = &work;
        work.set_finish([raw, buf, op, n] {
          if (Is16BitFloat(buf.dtype)) {
            if (op == ReduceOp::kAvg)
              DivideInPlace(DType::kF32, raw->scratch().data(), buf.count, n);
            Narrow16BitFloats(buf.dtype, raw->scratch().data(), buf.data,
                              buf.count);
          } else if (op == ReduceOp::kAvg) {
            DivideInPlace(buf.dtype, buf.data, buf.count, n);
          }
        });
        return absl::OkStatus();
      });
}

std::unique_ptr<Work> MpiCommunicator::PostBroadcast(BufferView buf, int root) {
  Fingerprint fp = MakeFingerprint(OpKind::kBroadcast, buf.dtype, buf.count);
  fp.root = root;
  MPI_Comm mpi_comm = impl_->comm;
  const int rank = rank_;
  return impl_->Collective(
      rank_, size_, fp, [=](MpiWork& work) -> absl::Status {
        MPI_Request request;
        int rc = MPI_Ibcast(buf.data, static_cast<int>(buf.count),
                            MoveType(buf.dtype), root, mpi_comm, &request);
        if (rc != MPI_SUCCESS) return MpiError("MPI_Ibcast", rc, rank);
        work.AddRequest(request);
        return absl::OkStatus();
      });
}

std::unique_ptr<Work> MpiCommunicator::PostAllGather(BufferView send,
                                                     BufferView recv) {
  Fingerprint fp = MakeFingerprint(OpKind::kAllGather, send.dtype, send.count);
  const bool in_place = Overlaps(send, recv);  // then exactly our slice
  MPI_Comm mpi_comm = impl_->comm;
  const int rank = rank_;
  return impl_->Collective(
      rank_, size_, fp, [=](MpiWork& work) -> absl::Status {
        MPI_Request request;
        int rc = MPI_Iallgather(
            in_place ? MPI_IN_PLACE : send.data, static_cast<int>(send.count),
            MoveType(send.dtype), recv.data, static_cast<int>(send.count),
            MoveType(recv.dtype), mpi_comm, &request);
        if (rc != MPI_SUCCESS) return MpiError("MPI_Iallgather", rc, rank);
        work.AddRequest(request);
        return absl::OkStatus();
      });
}

std::unique_ptr<Work> MpiCommunicator::PostReduceScatter(BufferView send,
                                                         BufferView recv,
                                                         ReduceOp op) {
  Fingerprint fp =
      MakeFingerprint(OpKind::kReduceScatter, recv.dtype, recv.count);
  fp.reduce_op = op;
  MPI_Comm mpi_comm = impl_->comm;
  const int rank = rank_;
  const int n = size_;
  return impl_->Collective(
      rank_, size_, fp, [=](MpiWork& work) -> absl::Status {
        // Reduce in f32 for halves; copy the input when recv lies inside
        // send (MPI would otherwise read a slice it is writing).
        std::vector<float>& scratch = work.scratch();
        const void* input = send.data;
        void* output = recv.data;
        MPI_Datatype type = MoveType(send.dtype);
        const bool half = Is16BitFloat(send.dtype);
        if (half) {
          scratch.resize(send.count + recv.count);
          Widen16BitFloats(send.dtype, send.data, scratch.data(), send.count);
          input = scratch.data();
          output = scratch.data() + send.count;
          type = MPI_FLOAT;
        } else if (Overlaps(send, recv)) {
          const int64_t float_words =
              (send.bytes() + sizeof(float) - 1) / sizeof(float);
          scratch.resize(float_words);
          std::memcpy(scratch.data(), send.data, send.bytes());
          input = scratch.data();
        }
        MPI_Request request;
        int rc = MPI_Ireduce_scatter_block(input, output,
                                           static_cast<int>(recv.count), type,
                                           ToMpiOp(op), mpi_comm, &request);
        if (rc != MPI_SUCCESS)
          return MpiError("MPI_Ireduce_scatter_block", rc, rank);
        work.AddRequest(request);
        MpiWork* raw = &work;
        work.set_finish([raw, send, recv, op, n, half] {
          if (half) {
            float* result = raw->scratch().data() + send.count;
            if (op == ReduceOp::kAvg)
              DivideInPlace(DType::kF32, result, recv.count, n);
            Narrow16BitFloats(recv.dtype, result, recv.data, recv.count);
          } else if (op == ReduceOp::kAvg) {
            DivideInPlace(recv.dtype, recv.data, recv.count, n);
          }
        });
        return absl::OkStatus();
      });
}

absl::Status MpiCommunicator::CheckOperation(const Operation& op) {
  const BufferView& buf = op.buf;
  const BufferView& recv = op.recv;
  switch (op.fp.op) {
    case OpKind::kAllGather: {
      if (absl::Status s = CheckCount("AllGather", recv.count, rank_);
          !s.ok()) {
        return s;
      }
      const int64_t slice_bytes = buf.bytes();
      char* my_slice = static_cast<char*>(recv.data) + rank_ * slice_bytes;
      if (Overlaps(buf, recv) && buf.data != my_slice) {
        return absl::InvalidArgumentError(absl::StrCat(
            "AllGather on rank ", rank_,
            ": send overlaps recv but is not rank ", rank_,
            "'s slice of it; pass disjoint buffers or exactly that slice"));
      }
      return absl::OkStatus();
    }
    case OpKind::kReduceScatter:
      return CheckCount("ReduceScatter", buf.count, rank_);
    case OpKind::kBarrier:
      return absl::OkStatus();
    default:
      return CheckCount(OpKindName(op.fp.op), buf.count, rank_);
  }
}

std::unique_ptr<Work> MpiCommunicator::PostSend(BufferView buf, int peer) {
  return impl_->PointToPoint(OpKind::kSend, buf, peer, rank_, size_);
}

std::unique_ptr<Work> MpiCommunicator::PostRecv(BufferView buf, int peer) {
  return impl_->PointToPoint(OpKind::kRecv, buf, peer, rank_, size_);
}

std::unique_ptr<Work> MpiCommunicator::PostBarrier() {
  MPI_Comm mpi_comm = impl_->comm;
  const int rank = rank_;
  return impl_->Collective(rank_, size_,
                           MakeFingerprint(OpKind::kBarrier, DType::kF32, 0),
                           [=](MpiWork& barrier) -> absl::Status {
                             MPI_Request request;
                             int rc = MPI_Ibarrier(mpi_comm, &request);
                             if (rc != MPI_SUCCESS)
                               return MpiError("MPI_Ibarrier", rc, rank);
                             barrier.AddRequest(request);
                             return absl::OkStatus();
                           });
}

void MpiAbort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

}  // namespace tandem::comm
