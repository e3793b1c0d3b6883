// The virtual world's summation tree on one rank: which real world sizes
// can play K virtual ranks without changing a sum's bits, and the
// accumulator that folds a rank's own virtual ranks into its subtree.
//
//   TANDEM_RETURN_IF_ERROR(CheckVirtualWorld(/*virtual_world=*/8,
//   comm.size())); TANDEM_ASSIGN_OR_RETURN(TreeAccumulator sum,
//       TreeAccumulator::Create(8 / comm.size(), DType::kF32, n));
//   for (each of this rank's virtual ranks, in order) {
//     ...backward...
//     TANDEM_RETURN_IF_ERROR(sum.Add(grads.data()));
//   }
//   // sum.result(): this rank's subtree; comm::OrderedAllReduce combines
//   // the ranks' subtrees with the tree over ranks.
//
// The tree is comm/ordered's canonical tree (comm/ordered/ordered_sum.h):
// T(lo, hi) = T(lo, mid) + T(mid, hi), mid = lo + (hi - lo) / 2. Real rank
// r of W plays virtual ranks [r K/W, (r+1) K/W). The result is the tree
// over the K virtual ranks, whatever W, exactly when each rank's range is a
// node of that tree and the tree above those nodes is the canonical tree
// over W (so the ordered collective completes it): AllowedWorldSizes.
// docs/scaling_design.md says why this tree.
#ifndef TANDEM_TRAIN_PARALLEL_CORE_CANONICAL_TREE_H_
#define TANDEM_TRAIN_PARALLEL_CORE_CANONICAL_TREE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/dtype.h"

namespace tandem::train {

// The real world sizes W that can play `virtual_world` (K >= 1) virtual
// ranks with the same bits, ascending: every power of two that divides K,
// and K itself (checked by the definition above, not assumed).
std::vector<int64_t> AllowedWorldSizes(int64_t virtual_world);

// OK when `world_size` is among AllowedWorldSizes(virtual_world);
// otherwise InvalidArgument naming both and the world sizes that work, e.g.
// "--virtual_world=12 at 3 ranks: ... use 1, 2, 4 or 12 ranks".
absl::Status CheckVirtualWorld(int64_t virtual_world, int64_t world_size);

// Folds `leaves` equal-length buffers, given in order, into their canonical
// tree sum, keeping at most one buffer per level of the tree (each leaf is
// copied unless it is added at once). The same bits as CanonicalTreeSum
// over all the leaves at once. One per rank and sum; not thread-safe.
class TreeAccumulator {
 public:
  // leaves >= 1, dtype f32 or f64, count >= 0; InvalidArgument otherwise.
  static absl::StatusOr<TreeAccumulator> Create(int64_t leaves, DType dtype,
                                                int64_t count);

  // The next leaf: `count` elements of `dtype`, read before Add returns.
  // FailedPrecondition once every leaf was added.
  absl::Status Add(const void* leaf);
  // The next leaf given in pieces that follow each other (a model's
  // gradients, parameter by parameter), read in place: the same sum as Add
  // of their concatenation. InvalidArgument unless the pieces' counts add
  // up to `count`.
  struct Piece {
    const void* data = nullptr;
    int64_t count = 0;
  };
  absl::Status AddPieces(absl::Span<const Piece> pieces);

  // After the last leaf: the sum (count elements, valid until Reset or the
  // accumulator's end). FailedPrecondition before, naming how many leaves
  // are missing.
  absl::StatusOr<const void*> result() const;
  // The same buffer, for a caller that finishes the sum in place (the
  // ordered all-reduce across ranks) before Reset.
  absl::StatusOr<void*> mutable_result();

  // Ready for the same number of leaves again (the buffers are kept).
  void Reset();

  int64_t leaves() const { return leaves_; }
  int64_t added() const { return added_; }

 private:
  TreeAccumulator(int64_t leaves, DType dtype, int64_t count);
  void Merge();  // the stack's top two: left = left + right, pop right
  char* Slot(size_t depth);

  int64_t leaves_;
  DType dtype_;
  int64_t count_;
  // merges_after_[i]: the tree's additions that complete once leaf i is in.
  std::vector<int64_t> merges_after_;
  int64_t added_ = 0;
  size_t stack_ = 0;                      // partial sums held
  std::vector<std::vector<char>> slots_;  // slots_[d]: stack entry d
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_CANONICAL_TREE_H_
