// Fingerprint: what a rank says it is doing at one step of a communication
// stream. The simulated cluster compares the fingerprints of all participants
// of every operation and fails every rank, showing both, when they disagree.
//
//   Fingerprint fp{.seq = 3, .op = OpKind::kAllReduce,
//                  .dtype = DType::kF32, .count = 1024,
//                  .reduce_op = ReduceOp::kSum};
//   fp.DebugString();   // "#3 AllReduce(f32 x 1024, sum)"
#ifndef TANDEM_COMM_FINGERPRINT_H_
#define TANDEM_COMM_FINGERPRINT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "comm/types.h"

namespace tandem::comm {

struct Fingerprint {
  // Collectives: the rank's collective number, from 0 in issue order.
  // Send/Recv: the number of the message on its (sender, receiver) pair.
  int64_t seq = 0;
  OpKind op = OpKind::kBarrier;
  DType dtype = DType::kF32;
  // AllReduce, Broadcast, Send, Recv: the buffer's count. AllGather: the send
  // count. ReduceScatter: the recv count. Barrier: 0.
  int64_t count = 0;
  int root = -1;                      // Broadcast only.
  std::optional<ReduceOp> reduce_op;  // AllReduce, ReduceScatter.
  int peer = -1;                      // Send: receiver. Recv: sender.

  // "#3 AllReduce(f32 x 1024, sum)", "#0 Broadcast(f32 x 8, root 1)",
  // "#2 Send(i64 x 5, to rank 1)", "#2 Recv(i64 x 5, from rank 0)",
  // "#7 Barrier()".
  std::string DebugString() const;
};

// A fingerprint of `op` on `count` elements of `dtype`; the other fields
// (seq, root, reduce op, peer) at their defaults, for the caller to set.
Fingerprint MakeFingerprint(OpKind op, DType dtype, int64_t count);

// A fixed-size encoding, for exchanging fingerprints between processes:
// seq, op, dtype, count, root, reduce op (-1 when none), peer.
inline constexpr int kFingerprintWords = 7;
using EncodedFingerprint = std::array<int64_t, kFingerprintWords>;
EncodedFingerprint Encode(const Fingerprint& fp);
// Inverse of Encode. Returns false (leaving `fp` unspecified) when a word is
// outside its enum's range: the words did not come from Encode.
bool Decode(const EncodedFingerprint& words, Fingerprint& fp);

// Two ranks' fingerprints of the same collective agree: same op, dtype,
// count, root and reduce op.
bool SameCollective(const Fingerprint& a, const Fingerprint& b);

// A Send and the Recv it is matched with agree: same dtype and count.
bool MatchingPointToPoint(const Fingerprint& send, const Fingerprint& recv);

// The check of one collective in a process engine (mpi, gloo): `gathered`
// holds every rank's encoded fingerprint (size * kFingerprintWords words,
// rank r's from r * kFingerprintWords), `mine` this rank's. OK when every
// rank's equals `mine`; otherwise FailedPrecondition, seen on `rank` of
// `backend`, naming each distinct fingerprint with the ranks that issued it
// ("rank 0 issued #3 AllReduce(f32 x 4, sum); rank 1 issued #3 AllReduce(f32
// x 5, sum)"). Every rank gathers the same words, so every rank fails.
absl::Status CompareGatheredFingerprints(std::string_view backend, int rank,
                                         int size,
                                         absl::Span<const int64_t> gathered,
                                         const EncodedFingerprint& mine);

// Whether a process engine checks its collectives: `requested` (its
// options), unless the environment variable TANDEM_DISTRIBUTED_DEBUG is
// DETAIL (on) or OFF (off), after PyTorch's TORCH_DISTRIBUTED_DEBUG.
bool CollectiveCheckRequested(bool requested);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_FINGERPRINT_H_
