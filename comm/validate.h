// Argument checks every backend runs when an operation is issued, so that all
// backends reject the same mistakes with the same messages.
//
//   if (absl::Status s = comm::ValidateAllReduce(buf, op, rank(), size());
//       !s.ok()) {
//     return comm::MakeCompletedWork(s);   // an already-failed Work
//   }
//
// Each function returns OK or kInvalidArgument with a message that names the
// operation and rank, says what was expected and what was found, e.g.
//   "AllGather on rank 1: recv.count must be world size x send.count =
//    4 x 256 = 1024 elements; found 1000"
// Pure functions; thread-safe.
#ifndef TANDEM_COMM_VALIDATE_H_
#define TANDEM_COMM_VALIDATE_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "comm/types.h"

namespace tandem::comm {

// A world size a backend can run: 1 <= size.
absl::Status ValidateWorldSize(int size);

// `name` ("buf", "send", "recv") is a valid view: known dtype, count >= 0,
// data non-null when count > 0, byte size representable.
absl::Status ValidateBuffer(OpKind op, absl::string_view name,
                            const BufferView& buf, int rank);

// A known reduce op, and not Avg on an integer dtype.
absl::Status ValidateReduceOp(OpKind op, ReduceOp reduce_op, DType dtype,
                              int rank);

absl::Status ValidateAllReduce(const BufferView& buf, ReduceOp op, int rank,
                               int size);
absl::Status ValidateBroadcast(const BufferView& buf, int root, int rank,
                               int size);
absl::Status ValidateAllGather(const BufferView& send, const BufferView& recv,
                               int rank, int size);
absl::Status ValidateReduceScatter(const BufferView& send,
                                   const BufferView& recv, ReduceOp op,
                                   int rank, int size);
// `op` is kSend or kRecv; `peer` must be another rank in [0, size).
absl::Status ValidatePointToPoint(OpKind op, const BufferView& buf, int peer,
                                  int rank, int size);

// `buf` lives in `space`, the only memory space `backend` moves.
absl::Status ValidateMemorySpace(OpKind op, absl::string_view name,
                                 const BufferView& buf, MemorySpace space,
                                 absl::string_view backend, int rank);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_VALIDATE_H_
