// Sums whose order is fixed: the same bits whatever the engine, the
// algorithm or the number of ranks that hold the terms.
//
//   // every rank: buf ends up holding the canonical tree sum over ranks
//   TANDEM_RETURN_IF_ERROR(comm::OrderedAllReduce(comm,
//       comm::HostView(absl::MakeSpan(grads))));
//
// The canonical tree over n leaves (in their order): T(lo, hi) is the leaf
// when hi - lo == 1, otherwise T(lo, mid) + T(mid, hi) with
// mid = lo + (hi - lo) / 2. Floating-point addition is commutative, so the
// bits of such a sum are fixed by the tree's shape and the leaves' order
// alone. Element by element, rank r's term is its leaf r.
//
// Why a tree of this shape (docs/scaling_design.md): a run at W ranks that
// each sum their own consecutive share of K terms with the canonical tree,
// and then combine the ranks' partial sums with the canonical tree over W,
// computes the canonical tree over the K terms, bit for bit, for every W
// that is a power of two dividing K and for W = K. The virtual world is
// built on that.
//
// An engine that reduces every rank's buffer in one place (sim) computes
// the tree itself: AllReduce / ReduceScatter with ReduceOp::kTreeSum
// (Communicator::native_tree_sum()), the kernel CanonicalTreeSum runs too.
// Everywhere else the collectives are built from Send/Recv and AllGather, so
// every engine computes the same bits (the conformance suite checks it):
//   - OrderedReduceScatter: the buffer cut into W segments; in round i
//     (1 <= i < W) rank r sends segment (r + i) mod W to its owner and
//     receives its own from rank (r - i) mod W (a pairwise exchange, as
//     much on the wire as a ring's reduce-scatter); then rank r sums the W
//     contributions to its segment with the canonical tree over ranks.
//   - OrderedAllReduce: OrderedReduceScatter, then AllGather (a ring
//     all-reduce's volume).
// Contract: collective (every rank calls it with the same dtype and count,
// in the same order relative to its other operations); blocking until
// this rank's part is done, each wait bounded by the engine's timeout;
// host memory, f32 and f64 (InvalidArgument otherwise, naming what to do);
// memory: W - 1 segments of staging (OrderedAllReduce: also a padded copy
// when size() does not divide the count), held in an OrderedSumWorkspace
// that a caller summing every step keeps (a fresh 64 MiB staging buffer
// costs its page faults on every call: 35x the sum's own time in
// bench/comm_benchmark), and a few cache-sized chunks. Errors name the
// rank and the operation.
#ifndef TANDEM_COMM_ORDERED_ORDERED_SUM_H_
#define TANDEM_COMM_ORDERED_ORDERED_SUM_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/types.h"

namespace tandem::comm {

// out[i] = the canonical tree sum of leaves[0][i], ..., leaves[n-1][i]
// (n >= 1 leaves of `count` elements of `dtype`, f32 or f64). `out` may be
// one of the leaves. InvalidArgument for no leaves, a negative count or
// another dtype.
absl::Status CanonicalTreeSum(DType dtype, int64_t count,
                              absl::Span<const void* const> leaves, void* out);

// The staging the ordered collectives reuse from call to call (grown to the
// largest call, never shrunk). One per rank; not thread-safe.
class OrderedSumWorkspace {
 public:
  // At least `bytes` of scratch for the use `slot` (0: the received
  // segments, 1: OrderedAllReduce's padded copy), uninitialised.
  char* Scratch(int slot, int64_t bytes);

 private:
  struct Buffer {
    std::unique_ptr<char[]> data;
    int64_t bytes = 0;
  };
  Buffer buffers_[2];
};

// send: size() * recv.count elements; rank r's recv ends up holding the
// canonical tree sum over ranks of send[r * recv.count, (r+1) * recv.count).
// In place is allowed (recv exactly that slice of send). `workspace`:
// nullptr for a staging buffer of this call's own.
absl::Status OrderedReduceScatter(Communicator& comm, BufferView send,
                                  BufferView recv,
                                  OrderedSumWorkspace* workspace = nullptr);

// In place: every rank's `buf` ends up holding the canonical tree sum over
// ranks of every rank's `buf` (any count; segments of ceil(count / size())
// elements, the last ones short or empty; in `buf` itself when size()
// divides the count, otherwise in a padded copy).
absl::Status OrderedAllReduce(Communicator& comm, BufferView buf,
                              OrderedSumWorkspace* workspace = nullptr);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_ORDERED_ORDERED_SUM_H_
