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
#include <functional>
#include <memory>
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
// tree sum, keeping at most one buffer per level of the tree plus one for
// the next leaf. The same bits as CanonicalTreeSum over all the leaves at
// once. Two ways to give a leaf:
//   - Add / AddPieces: read from the caller's memory (copied unless it is
//     added at once);
//   - NextLeafBuffer then AddWritten: the caller writes the leaf into the
//     accumulator's own buffer (a model whose gradients are views of it),
//     and no leaf is ever copied: it is kept where it is or added at once.
// Buffers come from `allocate` (Create's argument; default: owned memory)
// and are reused from sum to sum. One per rank and sum; not thread-safe.
class TreeAccumulator {
 public:
  // Memory for one buffer of `bytes`, alive as long as the accumulator
  // (the allocator's owner keeps it; a gradient may view it).
  using Allocator = std::function<absl::StatusOr<void*>(int64_t bytes)>;

  // leaves >= 1, dtype f32 or f64, count >= 0; InvalidArgument otherwise.
  static absl::StatusOr<TreeAccumulator> Create(int64_t leaves, DType dtype,
                                                int64_t count,
                                                Allocator allocate = nullptr);

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

  // Where the next leaf may be written in place (count elements, contents
  // undefined): the same buffer until AddWritten or Add*; after Reset, the
  // last sum's result buffer first. Errors: the allocator's.
  absl::StatusOr<void*> NextLeafBuffer();
  // Takes what the caller wrote into NextLeafBuffer() as the next leaf.
  // FailedPrecondition without a NextLeafBuffer() since the last leaf, or
  // once every leaf was added.
  absl::Status AddWritten();

  // After the last leaf: the sum (count elements, valid until the next
  // leaf after Reset, or the accumulator's end). FailedPrecondition before,
  // naming how many leaves are missing.
  absl::StatusOr<const void*> result() const;
  // The same buffer, for a caller that finishes the sum in place (the
  // ordered all-reduce across ranks) before Reset.
  absl::StatusOr<void*> mutable_result();

  // Ready for the same number of leaves again (the buffers are kept; the
  // result stays readable, and is the next NextLeafBuffer()).
  void Reset();

  int64_t leaves() const { return leaves_; }
  int64_t added() const { return added_; }

 private:
  TreeAccumulator(int64_t leaves, DType dtype, int64_t count,
                  Allocator allocate);
  absl::Status CheckRoom() const;
  absl::StatusOr<int> Acquire();  // a free buffer (allocated when none)
  void AddInto(int left, const char* right, int64_t count, int64_t at);
  void Merges(int64_t merges);  // the stack's top two, `merges` times

  int64_t leaves_;
  DType dtype_;
  int64_t count_;
  Allocator allocate_;
  // merges_after_[i]: the tree's additions that complete once leaf i is in.
  std::vector<int64_t> merges_after_;
  int64_t added_ = 0;
  std::vector<std::unique_ptr<char[]>> owned_;  // the default allocator's
  std::vector<char*> buffers_;                  // every buffer, by index
  std::vector<int> stack_;                      // partial sums, bottom first
  std::vector<int> free_;                       // reused last-in first-out
  int next_ = -1;                               // NextLeafBuffer()'s, or -1
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_CANONICAL_TREE_H_
