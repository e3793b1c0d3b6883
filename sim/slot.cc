// Slot: one operation's rendezvous and data movement (sim/group.h says the
// protocol): the task plan fixed from the fingerprint, one task's arithmetic,
// and Help, the claiming loop every waiting participant runs.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/fingerprint.h"
#include "comm/reduce.h"
#include "comm/types.h"
#include "sim/group.h"

namespace tandem::sim::internal {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Slot::Slot(const comm::Fingerprint& reference,
           std::vector<int> participant_ranks, int world_size,
           int64_t min_slice_bytes)
    : reference_(reference),
      participant_ranks_(std::move(participant_ranks)),
      world_size_(world_size),
      elem_size_(std::max<int64_t>(1, comm::DTypeSize(reference.dtype))),
      min_slice_bytes_(min_slice_bytes),
      endpoints_(participant_ranks_.size()),
      has_posted_(
          std::make_unique<std::atomic<char>[]>(participant_ranks_.size())),
      has_posted_capacity_(static_cast<int64_t>(participant_ranks_.size())) {
  Plan();
}

void Slot::ResetCollective(const comm::Fingerprint& reference, int world_size,
                           int64_t min_slice_bytes) {
  // The plan depends on the op, dtype, count and root (the reduce op and the
  // sequence number do not change it), the world size and the slice size: a
  // training loop repeats the same few collectives, so it is usually the
  // last one's.
  const bool same_plan =
      reference.op == reference_.op && reference.dtype == reference_.dtype &&
      reference.count == reference_.count &&
      reference.root == reference_.root && world_size == world_size_ &&
      min_slice_bytes == min_slice_bytes_ &&
      static_cast<int>(participant_ranks_.size()) == world_size;
  reference_ = reference;
  if (static_cast<int>(participant_ranks_.size()) != world_size ||
      world_size_ != world_size) {
    participant_ranks_.resize(world_size);
    for (int r = 0; r < world_size; ++r) participant_ranks_[r] = r;
  }
  world_size_ = world_size;
  elem_size_ = std::max<int64_t>(1, comm::DTypeSize(reference.dtype));
  min_slice_bytes_ = min_slice_bytes;
  endpoints_.assign(world_size, Endpoint{});
  if (has_posted_capacity_ < world_size) {
    has_posted_ = std::make_unique<std::atomic<char>[]>(world_size);
    has_posted_capacity_ = world_size;
  } else {
    for (int p = 0; p < world_size; ++p) {
      has_posted_[p].store(0, std::memory_order_relaxed);
    }
  }
  first_rank_ = -1;
  arrived_.store(0, std::memory_order_relaxed);
  latest_issue_s_.store(0, std::memory_order_relaxed);
  ready_.store(false, std::memory_order_relaxed);
  scan_.store(0, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  active_.store(0, std::memory_order_relaxed);
  if (!same_plan) {
    Plan();
    return;
  }
  const int64_t groups = static_cast<int64_t>(tasks_per_group_.size());
  for (int64_t g = 0; g < groups; ++g) {
    claim_[g * claim_stride_].store(0, std::memory_order_relaxed);
  }
}

void Slot::Plan() {
  const int n = world_size_;
  const int64_t count = reference_.count;
  chunk_elems_ = std::max<int64_t>(1, kChunkBytes / elem_size_);
  // Slice boundaries on 64-byte multiples, so no two ranks write one cache
  // line of the same buffer.
  const int64_t align = std::max<int64_t>(1, 64 / elem_size_);
  switch (reference_.op) {
    case comm::OpKind::kAllReduce: {
      // Slices of at least kMinSliceBytes: with many ranks and a small
      // buffer, one-cache-line slices would make every task touch a page of
      // every rank's buffer (a TLB miss each); bigger slices leave the
      // higher groups empty instead. Same arithmetic per element either way.
      const int64_t quantum =
          std::max(align, min_slice_bytes_ / elem_size_ / align * align);
      group_begin_.resize(n + 1);
      for (int g = 0; g < n; ++g) {
        const int64_t even =
            static_cast<int64_t>(static_cast<__int128>(count) * g / n);
        group_begin_[g] =
            std::min(count, (even + quantum - 1) / quantum * quantum);
      }
      group_begin_[n] = count;
      tasks_per_group_.resize(n);
      for (int g = 0; g < n; ++g) {
        tasks_per_group_[g] =
            CeilDiv(group_begin_[g + 1] - group_begin_[g], chunk_elems_);
      }
      break;
    }
    case comm::OpKind::kReduceScatter:
      tasks_per_group_.assign(n, CeilDiv(count, chunk_elems_));
      break;
    case comm::OpKind::kAllGather:
      tasks_per_group_.assign(n, n * CeilDiv(count, chunk_elems_));
      break;
    case comm::OpKind::kBroadcast:
      tasks_per_group_.assign(n, CeilDiv(count, chunk_elems_));
      tasks_per_group_[reference_.root] = 0;
      break;
    case comm::OpKind::kBarrier:
      tasks_per_group_.assign(1, 0);
      break;
    case comm::OpKind::kSend:
    case comm::OpKind::kRecv:
      tasks_per_group_.assign(1, CeilDiv(count, chunk_elems_));
      break;
  }
  total_tasks_ = 0;
  for (int64_t t : tasks_per_group_) total_tasks_ += t;
  const int64_t groups = static_cast<int64_t>(tasks_per_group_.size());
  claim_stride_ = groups <= 64 ? 64 / sizeof(std::atomic<int64_t>) : 1;
  const int64_t claims = groups * claim_stride_;
  if (claim_capacity_ < claims) {
    claim_ = std::make_unique<std::atomic<int64_t>[]>(claims);
    claim_capacity_ = claims;
  } else {
    // A recycled slot: only the counters this plan uses.
    for (int64_t g = 0; g < groups; ++g) {
      claim_[g * claim_stride_].store(0, std::memory_order_relaxed);
    }
  }
}

absl::Status Slot::RunTask(int g, int64_t t) {
  const int n = world_size_;
  const int64_t es = elem_size_;
  const int64_t c = reference_.count;
  auto at = [es](const void* base, int64_t index) {
    return static_cast<const char*>(base) + index * es;
  };
  auto at_mut = [es](void* base, int64_t index) {
    return static_cast<char*>(base) + index * es;
  };
  switch (reference_.op) {
    case comm::OpKind::kAllReduce: {
      const int64_t off = group_begin_[g] + t * chunk_elems_;
      const int64_t m = std::min(chunk_elems_, group_begin_[g + 1] - off);
      absl::InlinedVector<const void*, 16> srcs(n);
      absl::InlinedVector<void*, 16> dsts(n);
      for (int r = 0; r < n; ++r) {
        dsts[r] = at_mut(endpoints_[r].recv, off);
        srcs[r] = dsts[r];
      }
      return comm::ReduceInto(reference_.dtype, *reference_.reduce_op, m, srcs,
                              dsts, n);
    }
    case comm::OpKind::kReduceScatter: {
      const int64_t off = t * chunk_elems_;
      const int64_t m = std::min(chunk_elems_, c - off);
      absl::InlinedVector<const void*, 16> srcs(n);
      for (int s = 0; s < n; ++s) {
        srcs[s] = at(endpoints_[s].send, static_cast<int64_t>(g) * c + off);
      }
      void* dst[1] = {at_mut(endpoints_[g].recv, off)};
      return comm::ReduceInto(reference_.dtype, *reference_.reduce_op, m, srcs,
                              dst, n);
    }
    case comm::OpKind::kAllGather: {
      const int64_t per_source = CeilDiv(c, chunk_elems_);
      const int s = static_cast<int>(t / per_source);
      const int64_t off = (t % per_source) * chunk_elems_;
      const int64_t m = std::min(chunk_elems_, c - off);
      const void* src = at(endpoints_[s].send, off);
      void* dst = at_mut(endpoints_[g].recv, static_cast<int64_t>(s) * c + off);
      if (src != dst) std::memcpy(dst, src, m * es);  // in place: nothing to do
      return absl::OkStatus();
    }
    case comm::OpKind::kBroadcast: {
      const int64_t off = t * chunk_elems_;
      const int64_t m = std::min(chunk_elems_, c - off);
      std::memcpy(at_mut(endpoints_[g].recv, off),
                  at(endpoints_[reference_.root].send, off), m * es);
      return absl::OkStatus();
    }
    case comm::OpKind::kSend:
    case comm::OpKind::kRecv: {
      const int64_t off = t * chunk_elems_;
      const int64_t m = std::min(chunk_elems_, c - off);
      std::memcpy(at_mut(endpoints_[1].recv, off), at(endpoints_[0].send, off),
                  m * es);
      return absl::OkStatus();
    }
    case comm::OpKind::kBarrier:
      break;
  }
  return absl::OkStatus();
}

int64_t Slot::Help(int home, Group& group, int64_t max_tasks) {
  active_.fetch_add(1, std::memory_order_seq_cst);
  int64_t ran = 0;
  bool finished_last = false;
  bool stop = false;
  const int num_groups = static_cast<int>(tasks_per_group_.size());
  // Claims and runs tasks of group g until it has none left, max_tasks have
  // run or the run aborts. Returns true when group g has no task left.
  auto drain = [&](int g) {
    const int64_t limit = tasks_per_group_[g];
    std::atomic<int64_t>& next = claim_[g * claim_stride_];
    while (next.load(std::memory_order_relaxed) < limit) {
      if (ran >= max_tasks) return false;
      // Checked before every claim: after an abort no new task starts, so a
      // failing Work only has to wait for the tasks already running.
      if (group.aborted()) {
        stop = true;
        return false;
      }
      const int64_t t = next.fetch_add(1, std::memory_order_relaxed);
      if (t >= limit) break;
      absl::Status status = RunTask(g, t);
      if (!status.ok()) {
        group.Abort(absl::InternalError(absl::StrCat(
            "sim: task ", t, " of group ", g, " of ", reference_.DebugString(),
            " failed: ", status.message())));
      }
      ++ran;
      if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == total_tasks_) {
        finished_last = true;
      }
    }
    return true;
  };
  // Its own group first, then the others from the shared cursor, which only
  // moves past groups with nothing left to claim: each participant's scan
  // costs O(1) amortised rather than O(groups), so an operation's total
  // cost stays linear in the world size.
  if (home < num_groups) drain(home);
  int g = scan_.load(std::memory_order_relaxed);
  while (g < num_groups && ran < max_tasks && !stop) {
    if (!drain(g)) break;
    // Group g is exhausted: move the cursor past it (another helper may
    // have moved it further already).
    if (scan_.compare_exchange_strong(g, g + 1, std::memory_order_relaxed)) {
      ++g;
    }
  }
  const bool last_active = active_.fetch_sub(1, std::memory_order_seq_cst) == 1;
  // One call wakes every sleeper. (Tried: waking one per core and having
  // each woken rank wake the next, to keep the run queue short; on a 2-core
  // VM it caused more involuntary context switches, not fewer.)
  if (finished_last || (last_active && group.aborted())) group.Wake(*this);
  return ran;
}

}  // namespace tandem::sim::internal
