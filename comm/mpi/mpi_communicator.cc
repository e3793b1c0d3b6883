#include "comm/mpi/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "base/half.h"
#include "comm/validate.h"

namespace tandem::comm {
namespace {

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return absl::StrCat("MPI error ", code);
  }
  return std::string(text, length);
}

absl::Status MpiError(absl::string_view call, int code, int rank) {
  return absl::InternalError(
      absl::StrCat(call, " on rank ", rank, " failed: ", MpiErrorString(code)));
}

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
  }
  return MPI_OP_NULL;
}

bool IsHalf(DType dtype) {
  return dtype == DType::kF16 || dtype == DType::kBF16;
}

void HalfToF32(DType dtype, const void* src, float* dst, int64_t count) {
  const auto* in = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < count; ++i) {
    dst[i] = dtype == DType::kF16 ? half::F32FromF16(in[i])
                                  : half::F32FromBF16(in[i]);
  }
}

void F32ToHalf(DType dtype, const float* src, void* dst, int64_t count) {
  auto* out = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < count; ++i) {
    out[i] = dtype == DType::kF16 ? half::F16FromF32(src[i])
                                  : half::BF16FromF32(src[i]);
  }
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

// One in-flight MPI operation. Owns its temporaries; `finish` runs once,
// after MPI completes the requests (e.g. divide for Avg, round f32 -> f16).
class MpiWork final : public Work {
 public:
  MpiWork(std::string name, int rank, absl::Duration timeout)
      : name_(std::move(name)),
        rank_(rank),
        deadline_(timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                      : absl::Now() + timeout) {
  }

  // Takes ownership of a started request.
  void AddRequest(MPI_Request request) { requests_.push_back(request); }
  std::vector<float>& scratch() { return scratch_; }
  void set_finish(std::function<void()> finish) { finish_ = std::move(finish); }
  void Fail(absl::Status status) {
    status_ = std::move(status);
    done_ = true;
  }

  bool IsCompleted() override {
    if (!done_) Poll();
    return done_;
  }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time give_up = timeout == absl::InfiniteDuration()
                                   ? absl::InfiniteFuture()
                                   : absl::Now() + timeout;
    // Poll with yields for the first 20 ms: libnbc moves data only inside
    // MPI_Testall, so any pause between polls adds straight to the
    // operation's time (napping after 100 µs made a 140 µs 1 MiB all-reduce
    // take 1.2 ms). A yield still lets other ranks sharing the core run.
    // After that, the peer is late rather than the data in flight: nap 50 µs
    // between polls so the waiting rank leaves the core to others.
    const absl::Time nap_after = absl::Now() + absl::Milliseconds(20);
    while (!done_) {
      Poll();
      if (done_) break;
      const absl::Time now = absl::Now();
      if (now >= deadline_) {
        Fail(absl::DeadlineExceededError(absl::StrCat(
            name_, " on rank ", rank_,
            " did not complete within the MPI backend's timeout; a peer may "
            "have died or issued different collectives. MPI cannot cancel "
            "it: end the job.")));
        break;
      }
      if (now >= give_up) {
        return absl::DeadlineExceededError(absl::StrCat(
            name_, " on rank ", rank_, " still in flight after ",
            absl::FormatDuration(timeout), "; Wait again to keep waiting"));
      }
      if (now < nap_after) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    return status_;
  }

 private:
  void Poll() {
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(),
                         &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      Fail(MpiError(name_, rc, rank_));
      return;
    }
    if (!flag) return;
    if (finish_) finish_();
    done_ = true;
  }

  std::string name_;
  int rank_;
  absl::Time deadline_;
  std::vector<MPI_Request> requests_;
  std::vector<float> scratch_;
  std::function<void()> finish_;
  bool done_ = false;
  absl::Status status_;
};

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

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool initialized_mpi = false;
  MpiOptions options;
  int64_t sequence = 0;  // collectives issued, for messages
};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(
    const MpiOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "MpiCommunicator: timeout must be positive");
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
  return comm;
}

MpiCommunicator::~MpiCommunicator() {
  if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
  if (impl_->initialized_mpi) MPI_Finalize();
}

std::unique_ptr<Work> MpiCommunicator::AllReduce(BufferView buf, ReduceOp op) {
  absl::Status valid = ValidateAllReduce(buf, op, rank_, size_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kAllReduce, "buf", buf,
                                MemorySpace::kHost, "mpi", rank_);
  if (valid.ok()) valid = CheckCount("AllReduce", buf.count, rank_);
  if (!valid.ok()) return MakeCompletedWork(valid);
  auto work = std::make_unique<MpiWork>(
      absl::StrCat("AllReduce #", impl_->sequence++, " (", buf.DebugString(),
                   ", ", ReduceOpName(op), ")"),
      rank_, impl_->options.timeout);
  void* data = buf.data;
  MPI_Datatype type = MoveType(buf.dtype);
  if (IsHalf(buf.dtype)) {
    work->scratch().resize(buf.count);
    HalfToF32(buf.dtype, buf.data, work->scratch().data(), buf.count);
    data = work->scratch().data();
    type = MPI_FLOAT;
  }
  MPI_Request request;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(buf.count), type,
                          ToMpiOp(op), impl_->comm, &request);
  if (rc != MPI_SUCCESS)
    return MakeCompletedWork(MpiError("MPI_Iallreduce", rc, rank_));
  work->AddRequest(request);
  const int n = size_;
  MpiWork* raw = work.get();
  work->set_finish([raw, buf, op, n] {
    if (IsHalf(buf.dtype)) {
      if (op == ReduceOp::kAvg)
        DivideInPlace(DType::kF32, raw->scratch().data(), buf.count, n);
      F32ToHalf(buf.dtype, raw->scratch().data(), buf.data, buf.count);
    } else if (op == ReduceOp::kAvg) {
      DivideInPlace(buf.dtype, buf.data, buf.count, n);
    }
  });
  return work;
}

std::unique_ptr<Work> MpiCommunicator::Broadcast(BufferView buf, int root) {
  absl::Status valid = ValidateBroadcast(buf, root, rank_, size_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kBroadcast, "buf", buf,
                                MemorySpace::kHost, "mpi", rank_);
  if (valid.ok()) valid = CheckCount("Broadcast", buf.count, rank_);
  if (!valid.ok()) return MakeCompletedWork(valid);
  auto work = std::make_unique<MpiWork>(
      absl::StrCat("Broadcast #", impl_->sequence++, " (", buf.DebugString(),
                   ", root ", root, ")"),
      rank_, impl_->options.timeout);
  MPI_Request request;
  int rc = MPI_Ibcast(buf.data, static_cast<int>(buf.count),
                      MoveType(buf.dtype), root, impl_->comm, &request);
  if (rc != MPI_SUCCESS)
    return MakeCompletedWork(MpiError("MPI_Ibcast", rc, rank_));
  work->AddRequest(request);
  return work;
}

std::unique_ptr<Work> MpiCommunicator::AllGather(BufferView send,
                                                 BufferView recv) {
  absl::Status valid = ValidateAllGather(send, recv, rank_, size_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kAllGather, "send", send,
                                MemorySpace::kHost, "mpi", rank_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kAllGather, "recv", recv,
                                MemorySpace::kHost, "mpi", rank_);
  if (valid.ok()) valid = CheckCount("AllGather", recv.count, rank_);
  if (!valid.ok()) return MakeCompletedWork(valid);
  auto work =
      std::make_unique<MpiWork>(absl::StrCat("AllGather #", impl_->sequence++,
                                             " (", send.DebugString(), ")"),
                                rank_, impl_->options.timeout);
  const int64_t slice_bytes = send.bytes();
  char* my_slice = static_cast<char*>(recv.data) + rank_ * slice_bytes;
  const void* send_data = send.data;
  if (Overlaps(send, recv)) {
    if (send.data != my_slice) {
      return MakeCompletedWork(absl::InvalidArgumentError(absl::StrCat(
          "AllGather on rank ", rank_, ": send overlaps recv but is not rank ",
          rank_,
          "'s slice of it; pass disjoint buffers or exactly that slice")));
    }
    send_data = MPI_IN_PLACE;
  }
  MPI_Request request;
  int rc = MPI_Iallgather(send_data, static_cast<int>(send.count),
                          MoveType(send.dtype), recv.data,
                          static_cast<int>(send.count), MoveType(recv.dtype),
                          impl_->comm, &request);
  if (rc != MPI_SUCCESS)
    return MakeCompletedWork(MpiError("MPI_Iallgather", rc, rank_));
  work->AddRequest(request);
  return work;
}

std::unique_ptr<Work> MpiCommunicator::ReduceScatter(BufferView send,
                                                     BufferView recv,
                                                     ReduceOp op) {
  absl::Status valid = ValidateReduceScatter(send, recv, op, rank_, size_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kReduceScatter, "send", send,
                                MemorySpace::kHost, "mpi", rank_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kReduceScatter, "recv", recv,
                                MemorySpace::kHost, "mpi", rank_);
  if (valid.ok()) valid = CheckCount("ReduceScatter", send.count, rank_);
  if (!valid.ok()) return MakeCompletedWork(valid);
  auto work = std::make_unique<MpiWork>(
      absl::StrCat("ReduceScatter #", impl_->sequence++, " (",
                   send.DebugString(), ", ", ReduceOpName(op), ")"),
      rank_, impl_->options.timeout);
  // Reduce in f32 for halves; copy the input when recv lies inside send (MPI
  // would otherwise read a slice it is writing).
  std::vector<float>& scratch = work->scratch();
  const void* input = send.data;
  void* output = recv.data;
  MPI_Datatype type = MoveType(send.dtype);
  const bool half = IsHalf(send.dtype);
  if (half) {
    scratch.resize(send.count + recv.count);
    HalfToF32(send.dtype, send.data, scratch.data(), send.count);
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
  int rc =
      MPI_Ireduce_scatter_block(input, output, static_cast<int>(recv.count),
                                type, ToMpiOp(op), impl_->comm, &request);
  if (rc != MPI_SUCCESS) {
    return MakeCompletedWork(MpiError("MPI_Ireduce_scatter_block", rc, rank_));
  }
  work->AddRequest(request);
  const int n = size_;
  MpiWork* raw = work.get();
  work->set_finish([raw, send, recv, op, n, half] {
    if (half) {
      float* result = raw->scratch().data() + send.count;
      if (op == ReduceOp::kAvg)
        DivideInPlace(DType::kF32, result, recv.count, n);
      F32ToHalf(recv.dtype, result, recv.data, recv.count);
    } else if (op == ReduceOp::kAvg) {
      DivideInPlace(recv.dtype, recv.data, recv.count, n);
    }
  });
  return work;
}

std::unique_ptr<Work> MpiCommunicator::Send(BufferView buf, int peer) {
  absl::Status valid =
      ValidatePointToPoint(OpKind::kSend, buf, peer, rank_, size_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kSend, "buf", buf, MemorySpace::kHost,
                                "mpi", rank_);
  if (valid.ok()) valid = CheckCount("Send", buf.count, rank_);
  if (!valid.ok()) return MakeCompletedWork(valid);
  auto work = std::make_unique<MpiWork>(
      absl::StrCat("Send to ", peer, " (", buf.DebugString(), ")"), rank_,
      impl_->options.timeout);
  MPI_Request request;
  int rc = MPI_Isend(buf.data, static_cast<int>(buf.count), MoveType(buf.dtype),
                     peer, /*tag=*/0, impl_->comm, &request);
  if (rc != MPI_SUCCESS)
    return MakeCompletedWork(MpiError("MPI_Isend", rc, rank_));
  work->AddRequest(request);
  return work;
}

std::unique_ptr<Work> MpiCommunicator::Recv(BufferView buf, int peer) {
  absl::Status valid =
      ValidatePointToPoint(OpKind::kRecv, buf, peer, rank_, size_);
  if (valid.ok())
    valid = ValidateMemorySpace(OpKind::kRecv, "buf", buf, MemorySpace::kHost,
                                "mpi", rank_);
  if (valid.ok()) valid = CheckCount("Recv", buf.count, rank_);
  if (!valid.ok()) return MakeCompletedWork(valid);
  auto work = std::make_unique<MpiWork>(
      absl::StrCat("Recv from ", peer, " (", buf.DebugString(), ")"), rank_,
      impl_->options.timeout);
  MPI_Request request;
  int rc = MPI_Irecv(buf.data, static_cast<int>(buf.count), MoveType(buf.dtype),
                     peer, /*tag=*/0, impl_->comm, &request);
  if (rc != MPI_SUCCESS)
    return MakeCompletedWork(MpiError("MPI_Irecv", rc, rank_));
  work->AddRequest(request);
  return work;
}

absl::Status MpiCommunicator::Barrier() {
  MpiWork work(absl::StrCat("Barrier #", impl_->sequence++), rank_,
               impl_->options.timeout);
  MPI_Request request;
  int rc = MPI_Ibarrier(impl_->comm, &request);
  if (rc != MPI_SUCCESS) return MpiError("MPI_Ibarrier", rc, rank_);
  work.AddRequest(request);
  return work.Wait(absl::InfiniteDuration());
}

void MpiAbort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

}  // namespace tandem::comm
