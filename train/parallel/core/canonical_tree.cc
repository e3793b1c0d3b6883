#include "train/parallel/core/canonical_tree.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

// Whether ranks [a, b) of `world`, as node [a K/W, b K/W) of the tree over
// K leaves, split as the tree over W splits them, down to single ranks.
bool Aligned(int64_t k, int64_t world, int64_t a, int64_t b) {
  if (b - a == 1) return true;
  const int64_t lo = a * k / world;
  const int64_t hi = b * k / world;
  const int64_t mid_leaves = lo + (hi - lo) / 2;
  const int64_t mid_ranks = a + (b - a) / 2;
  if (mid_leaves != mid_ranks * k / world) return false;
  return Aligned(k, world, a, mid_ranks) && Aligned(k, world, mid_ranks, b);
}

// Whether leaves [lo, hi) form a node of the tree over [0, n).
bool IsNode(int64_t lo, int64_t hi, int64_t node_lo, int64_t node_hi) {
  if (lo == node_lo && hi == node_hi) return true;
  if (node_hi - node_lo == 1) return false;
  const int64_t mid = node_lo + (node_hi - node_lo) / 2;
  if (hi <= mid) return IsNode(lo, hi, node_lo, mid);
  if (lo >= mid) return IsNode(lo, hi, mid, node_hi);
  return false;
}

// The tree's post-order: after each leaf, how many additions complete.
void Schedule(int64_t lo, int64_t hi, std::vector<int64_t>& merges_after) {
  if (hi - lo == 1) {
    merges_after.push_back(0);
    return;
  }
  const int64_t mid = lo + (hi - lo) / 2;
  Schedule(lo, mid, merges_after);
  Schedule(mid, hi, merges_after);
  ++merges_after.back();  // this node completes with its last leaf
}

template <typename T>
void AddSpan(char* left, const char* right, int64_t count) {
  T* l = reinterpret_cast<T*>(left);
  const T* r = reinterpret_cast<const T*>(right);
  for (int64_t i = 0; i < count; ++i) l[i] = l[i] + r[i];
}

}  // namespace

std::vector<int64_t> AllowedWorldSizes(int64_t virtual_world) {
  std::vector<int64_t> allowed;
  for (int64_t w = 1; w <= virtual_world; ++w) {
    if (virtual_world % w != 0) continue;
    bool nodes = true;
    for (int64_t r = 0; r < w && nodes; ++r) {
      nodes = IsNode(r * virtual_world / w, (r + 1) * virtual_world / w, 0,
                     virtual_world);
    }
    if (nodes && Aligned(virtual_world, w, 0, w)) allowed.push_back(w);
  }
  return allowed;
}

absl::Status CheckVirtualWorld(int64_t virtual_world, int64_t world_size) {
  if (virtual_world < 1 || world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--virtual_world=", virtual_world, " at ", world_size,
                     " ranks; expected both >= 1"));
  }
  const std::vector<int64_t> allowed = AllowedWorldSizes(virtual_world);
  for (int64_t w : allowed) {
    if (w == world_size) return absl::OkStatus();
  }
  std::string list = absl::StrJoin(allowed.begin(), allowed.end() - 1, ", ");
  list = allowed.size() == 1 ? absl::StrCat(allowed.back())
                             : absl::StrCat(list, " or ", allowed.back());
  const bool power_of_two = (world_size & (world_size - 1)) == 0;
  return absl::InvalidArgumentError(absl::StrCat(
      "--virtual_world=", virtual_world, " at ", world_size,
      " ranks: the ranks must split the ", virtual_world,
      " virtual ranks along the fixed summation tree (each rank an equal, "
      "whole subtree); use ",
      list, " ranks, or ",
      power_of_two
          ? absl::StrCat("a --virtual_world that is a multiple of ", world_size)
          : absl::StrCat("--virtual_world=", world_size),
      " at ", world_size, " ranks"));
}

absl::StatusOr<TreeAccumulator> TreeAccumulator::Create(int64_t leaves,
                                                        DType dtype,
                                                        int64_t count,
                                                        Allocator allocate) {
  if (leaves < 1 || count < 0 ||
      (dtype != DType::kF32 && dtype != DType::kF64)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TreeAccumulator: ", leaves, " leaves of ", count, " elements of ",
        DTypeName(dtype),
        "; expected at least one leaf, a count >= 0 and f32 or f64"));
  }
  return TreeAccumulator(leaves, dtype, count, std::move(allocate));
}

TreeAccumulator::TreeAccumulator(int64_t leaves, DType dtype, int64_t count,
                                 Allocator allocate)
    : leaves_(leaves),
      dtype_(dtype),
      count_(count),
      allocate_(std::move(allocate)) {
  Schedule(0, leaves, merges_after_);
}

absl::Status TreeAccumulator::CheckRoom() const {
  if (added_ == leaves_) {
    return absl::FailedPreconditionError(
        absl::StrCat("TreeAccumulator: all ", leaves_,
                     " leaves were added; Reset before the next sum"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> TreeAccumulator::Acquire() {
  if (!free_.empty()) {
    const int b = free_.back();
    free_.pop_back();
    return b;
  }
  // At least one element, so that every buffer has an address of its own.
  const int64_t bytes = std::max<int64_t>(1, count_) * DTypeSize(dtype_);
  char* memory = nullptr;
  if (allocate_ != nullptr) {
    TANDEM_ASSIGN_OR_RETURN(void* got, allocate_(bytes));
    memory = static_cast<char*>(got);
  } else {
    owned_.push_back(std::make_unique<char[]>(static_cast<size_t>(bytes)));
    memory = owned_.back().get();
  }
  buffers_.push_back(memory);
  return static_cast<int>(buffers_.size()) - 1;
}

void TreeAccumulator::AddInto(int left, const char* right, int64_t count,
                              int64_t at) {
  char* l = buffers_[left] + at * DTypeSize(dtype_);
  if (dtype_ == DType::kF32) {
    AddSpan<float>(l, right, count);
  } else {
    AddSpan<double>(l, right, count);
  }
}

void TreeAccumulator::Merges(int64_t merges) {
  for (; merges > 0; --merges) {
    const int right = stack_.back();
    stack_.pop_back();
    AddInto(stack_.back(), buffers_[right], count_, 0);
    free_.push_back(right);
  }
}

absl::Status TreeAccumulator::Add(const void* leaf) {
  const Piece whole{leaf, count_};
  return AddPieces(absl::MakeConstSpan(&whole, 1));
}

absl::Status TreeAccumulator::AddPieces(absl::Span<const Piece> pieces) {
  TANDEM_RETURN_IF_ERROR(CheckRoom());
  int64_t total = 0;
  for (const Piece& p : pieces) total += p.count;
  if (total != count_) {
    return absl::InvalidArgumentError(
        absl::StrCat("TreeAccumulator: a leaf of ", total,
                     " elements in pieces; expected ", count_));
  }
  const int64_t size = DTypeSize(dtype_);
  int64_t merges = merges_after_[static_cast<size_t>(added_)];
  if (merges > 0) {
    // The leaf is the right child of the top: add it in place, uncopied.
    int64_t at = 0;
    for (const Piece& p : pieces) {
      AddInto(stack_.back(), static_cast<const char*>(p.data), p.count, at);
      at += p.count;
    }
    --merges;
  } else {
    int slot = next_;
    next_ = -1;
    if (slot < 0) {
      TANDEM_ASSIGN_OR_RETURN(slot, Acquire());
    }
    char* out = buffers_[slot];
    for (const Piece& p : pieces) {
      if (p.count > 0) std::memcpy(out, p.data, p.count * size);
      out += p.count * size;
    }
    stack_.push_back(slot);
  }
  Merges(merges);
  ++added_;
  return absl::OkStatus();
}

absl::StatusOr<void*> TreeAccumulator::NextLeafBuffer() {
  if (next_ < 0) {
    TANDEM_ASSIGN_OR_RETURN(next_, Acquire());
  }
  return static_cast<void*>(buffers_[next_]);
}

absl::Status TreeAccumulator::AddWritten() {
  TANDEM_RETURN_IF_ERROR(CheckRoom());
  if (next_ < 0) {
    return absl::FailedPreconditionError(
        "TreeAccumulator::AddWritten: no leaf was written; call "
        "NextLeafBuffer() and write the leaf there first");
  }
  int64_t merges = merges_after_[static_cast<size_t>(added_)];
  if (merges > 0) {
    // Added to the top at once; the buffer stays the next leaf's.
    AddInto(stack_.back(), buffers_[next_], count_, 0);
    --merges;
  } else {
    stack_.push_back(next_);
    next_ = -1;
  }
  Merges(merges);
  ++added_;
  return absl::OkStatus();
}

absl::StatusOr<const void*> TreeAccumulator::result() const {
  if (added_ < leaves_) {
    return absl::FailedPreconditionError(
        absl::StrCat("TreeAccumulator: ", added_, " of ", leaves_,
                     " leaves added; the sum is not complete"));
  }
  return static_cast<const void*>(buffers_[stack_[0]]);
}

absl::StatusOr<void*> TreeAccumulator::mutable_result() {
  TANDEM_RETURN_IF_ERROR(result().status());
  return static_cast<void*>(buffers_[stack_[0]]);
}

void TreeAccumulator::Reset() {
  if (next_ >= 0) free_.push_back(next_);
  next_ = -1;
  // The bottom last, so that the result's buffer is the next leaf's.
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
    free_.push_back(*it);
  }
  stack_.clear();
  added_ = 0;
}

}  // namespace tandem::train
