#include "comm/validate.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "comm/types.h"

namespace tandem::comm {
namespace {

std::string Where(OpKind op, int rank) {
  return absl::StrCat(OpKindName(op), " on rank ", rank, ": ");
}

// Byte address of element `index` of `buf`, for overlap checks.
uintptr_t Address(const BufferView& buf, int64_t index) {
  return reinterpret_cast<uintptr_t>(buf.data) +
         static_cast<uintptr_t>(index * DTypeSize(buf.dtype));
}

bool Overlap(const BufferView& a, const BufferView& b) {
  if (a.count == 0 || b.count == 0) return false;
  const uintptr_t a0 = Address(a, 0), a1 = Address(a, a.count);
  const uintptr_t b0 = Address(b, 0), b1 = Address(b, b.count);
  return a0 < b1 && b0 < a1;
}

std::string SpaceName(MemorySpace space) {
  return space == MemorySpace::kHost ? "host" : "cuda";
}

absl::Status SameDType(OpKind op, const BufferView& send,
                       const BufferView& recv, int rank) {
  if (send.dtype == recv.dtype) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      Where(op, rank), "send and recv must have the same dtype; found send ",
      DTypeName(send.dtype), " and recv ", DTypeName(recv.dtype)));
}

}  // namespace

absl::Status ValidateWorldSize(int size) {
  if (size >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "world size must be at least 1; found ", size,
      ". Pass the number of ranks to run (1 for a single process)."));
}

absl::Status ValidateBuffer(OpKind op, absl::string_view name,
                            const BufferView& buf, int rank) {
  if (!IsValidDType(buf.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank), name, " has an unknown dtype ", DTypeName(buf.dtype),
        "; expected one of f32, f64, f16, bf16, i32, "
        "i64, u8"));
  }
  if (buf.count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank), name, ".count must be >= 0; found ", buf.count));
  }
  if (buf.count > std::numeric_limits<int64_t>::max() / 8) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(op, rank), name, ".count ", buf.count,
                     " is too large to address in bytes"));
  }
  if (buf.data == nullptr && buf.count > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank), name, " is null but its count is ", buf.count,
        "; expected a pointer to ", buf.count, " ", DTypeName(buf.dtype),
        " elements (or count 0 for an empty operation)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReduceOp(OpKind op, ReduceOp reduce_op, DType dtype,
                              int rank) {
  if (!IsValidReduceOp(reduce_op)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank), "unknown reduce op ", ReduceOpName(reduce_op),
        "; expected sum, avg, max, min, prod or tree_sum"));
  }
  if (reduce_op == ReduceOp::kTreeSum && !IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(op, rank),
                     "reduce op tree_sum needs a floating-point dtype "
                     "(f32, f64, f16, bf16); found ",
                     DTypeName(dtype),
                     ". Integer sums do not depend on the order: use sum"));
  }
  if (reduce_op == ReduceOp::kAvg && !IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(op, rank),
                     "reduce op avg needs a floating-point dtype (f32, "
                     "f64, f16, bf16); found ",
                     DTypeName(dtype),
                     ". Use sum and divide, or convert to a float type first"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAllReduce(const BufferView& buf, ReduceOp op, int rank,
                               int size) {
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(size));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(OpKind::kAllReduce, "buf", buf, rank));
  return ValidateReduceOp(OpKind::kAllReduce, op, buf.dtype, rank);
}

absl::Status ValidateBroadcast(const BufferView& buf, int root, int rank,
                               int size) {
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(size));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(OpKind::kBroadcast, "buf", buf, rank));
  if (root < 0 || root >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(OpKind::kBroadcast, rank), "root must be in [0, ",
                     size, ") for world size ", size, "; found root ", root));
  }
  return absl::OkStatus();
}

absl::Status ValidateAllGather(const BufferView& send, const BufferView& recv,
                               int rank, int size) {
  const OpKind op = OpKind::kAllGather;
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(size));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(op, "send", send, rank));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(op, "recv", recv, rank));
  TANDEM_RETURN_IF_ERROR(SameDType(op, send, recv, rank));
  if (send.count > std::numeric_limits<int64_t>::max() / 8 / size ||
      recv.count != send.count * size) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank), "recv.count must be world size x send.count = ", size,
        " x ", send.count, " = ", send.count * size, " elements; found ",
        recv.count));
  }
  if (Overlap(send, recv) &&
      Address(send, 0) != Address(recv, rank * send.count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank),
        "send overlaps recv; expected either disjoint "
        "buffers or the in-place form send == recv + rank x send.count (",
        rank * send.count, " elements into recv); found send at element ",
        (static_cast<int64_t>(Address(send, 0)) -
         static_cast<int64_t>(Address(recv, 0))) /
            DTypeSize(recv.dtype),
        " of recv"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReduceScatter(const BufferView& send,
                                   const BufferView& recv, ReduceOp op,
                                   int rank, int size) {
  const OpKind kind = OpKind::kReduceScatter;
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(size));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(kind, "send", send, rank));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(kind, "recv", recv, rank));
  TANDEM_RETURN_IF_ERROR(SameDType(kind, send, recv, rank));
  TANDEM_RETURN_IF_ERROR(ValidateReduceOp(kind, op, send.dtype, rank));
  if (recv.count > std::numeric_limits<int64_t>::max() / 8 / size ||
      send.count != recv.count * size) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(kind, rank),
        "send.count must be world size x recv.count = ", size, " x ",
        recv.count, " = ", recv.count * size, " elements; found ", send.count));
  }
  if (Overlap(send, recv) &&
      Address(recv, 0) != Address(send, rank * recv.count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(kind, rank),
        "recv overlaps send; expected either disjoint "
        "buffers or the in-place form recv == send + rank x recv.count (",
        rank * recv.count, " elements into send); found recv at element ",
        (static_cast<int64_t>(Address(recv, 0)) -
         static_cast<int64_t>(Address(send, 0))) /
            DTypeSize(send.dtype),
        " of send"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePointToPoint(OpKind op, const BufferView& buf, int peer,
                                  int rank, int size) {
  TANDEM_RETURN_IF_ERROR(ValidateWorldSize(size));
  TANDEM_RETURN_IF_ERROR(ValidateBuffer(op, "buf", buf, rank));
  if (peer < 0 || peer >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(op, rank), "peer must be in [0, ", size,
                     ") for world size ", size, "; found peer ", peer));
  }
  if (peer == rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(op, rank), "peer must be another rank; found peer ", peer,
        ", this rank itself. Copy the buffer locally instead"));
  }
  return absl::OkStatus();
}

absl::Status ValidateMemorySpace(OpKind op, absl::string_view name,
                                 const BufferView& buf, MemorySpace space,
                                 absl::string_view backend, int rank) {
  if (buf.space == space) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Where(op, rank), "the ", backend, " backend moves ",
                   SpaceName(space), " memory only; found ", name, " in ",
                   buf.DebugString(), ". Copy the data to ", SpaceName(space),
                   " memory or use a backend "
                   "for that memory space"));
}

}  // namespace tandem::comm
