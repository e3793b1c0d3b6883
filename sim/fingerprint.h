// Fingerprint: what a rank says it is doing at one step of a communication
// stream. The simulated cluster compares the fingerprints of all participants
// of every operation and fails every rank, showing both, when they disagree.
//
//   Fingerprint fp{.seq = 3, .op = comm::OpKind::kAllReduce,
//                  .dtype = comm::DType::kF32, .count = 1024,
//                  .reduce_op = comm::ReduceOp::kSum};
//   fp.DebugString();   // "#3 AllReduce(f32 x 1024, sum)"
#ifndef TANDEM_SIM_FINGERPRINT_H_
#define TANDEM_SIM_FINGERPRINT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "comm/types.h"

namespace tandem::sim {

struct Fingerprint {
  // Collectives: the rank's collective number, from 0 in issue order.
  // Send/Recv: the number of the message on its (sender, receiver) pair.
  int64_t seq = 0;
  comm::OpKind op = comm::OpKind::kBarrier;
  comm::DType dtype = comm::DType::kF32;
  // AllReduce, Broadcast, Send, Recv: the buffer's count. AllGather: the send
  // count. ReduceScatter: the recv count. Barrier: 0.
  int64_t count = 0;
  int root = -1;                            // Broadcast only.
  std::optional<comm::ReduceOp> reduce_op;  // AllReduce, ReduceScatter.
  int peer = -1;                            // Send: receiver. Recv: sender.

  // "#3 AllReduce(f32 x 1024, sum)", "#0 Broadcast(f32 x 8, root 1)",
  // "#2 Send(i64 x 5, to rank 1)", "#2 Recv(i64 x 5, from rank 0)",
  // "#7 Barrier()".
  std::string DebugString() const;
};

// Two ranks' fingerprints of the same collective agree: same op, dtype,
// count, root and reduce op.
bool SameCollective(const Fingerprint& a, const Fingerprint& b);

// A Send and the Recv it is matched with agree: same dtype and count.
bool MatchingPointToPoint(const Fingerprint& send, const Fingerprint& recv);

}  // namespace tandem::sim

#endif  // TANDEM_SIM_FINGERPRINT_H_
