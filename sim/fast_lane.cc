#include "sim/fast_lane.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"
#include "comm/reduce.h"
#include "comm/stall_note.h"
#include "comm/types.h"
#include "sim/block_cache.h"
#include "sim/cpu_relax.h"

namespace tandem::sim::internal {

// One rank's contribution to one lane collective. Its first cache line
// holds everything a peer reads for an 8- or 16-byte all-reduce: the
// collective's number (written last: its publication), the node its owner's
// next lane collective will use, the fingerprint's other fields and the
// first bytes of the data. A peer waiting for this node spins on that line
// and, once it is published, has what it needs in the same transfer.
// Peers never write to a node.
struct alignas(64) FastLanes::Node {
  // The fingerprint without its number.
  struct Body {
    comm::OpKind op = comm::OpKind::kAllReduce;
    DType dtype = DType::kF32;
    std::optional<comm::ReduceOp> reduce_op;
    int32_t root = -1;
    int32_t peer = -1;
    int64_t count = 0;
  };
  // The lane collective this node holds; published with release once
  // `next`, `body` and `data` are written. Only grows: a node reused holds a
  // higher number than every collective it held before.
  std::atomic<int64_t> seq{-1};
  // The node the owner's next lane collective will use (chosen when this
  // one is published: the peers go on there).
  Node* next = nullptr;
  Body body;
  unsigned char data[kMaxBytes];

  comm::Fingerprint Fingerprint(int64_t number) const {
    comm::Fingerprint fp =
        comm::MakeFingerprint(body.op, body.dtype, body.count);
    fp.seq = number;
    fp.reduce_op = body.reduce_op;
    fp.root = body.root;
    fp.peer = body.peer;
    return fp;
  }
};

struct alignas(64) FastLanes::Lane {
  // The owner's side (its thread only).
  // The node the next lane collective will use (its peers wait there).
  Node* announced = nullptr;
  // Published nodes in publication order, in_use[in_use_head..]; the front
  // ones go back to `free` once every peer has completed their collectives.
  std::vector<Node*> in_use;
  size_t in_use_head = 0;
  std::vector<Node*> free;
  // The lowest `done` among the peers when last looked at (a lower bound of
  // the current one: `done` only grows).
  int64_t peers_done = -1;
  std::vector<std::unique_ptr<Node>> owned;
  // Bumped after every publication; a rank waiting for this lane sleeps on
  // it.
  alignas(64) EventWord event;
};

struct alignas(64) FastLanes::Consumer {
  // Per peer: the node where that peer's next lane collective will appear,
  // and the number of the last one of its collectives this rank completed
  // (-1: none). `expect[p]` is published once its seq exceeds `after[p]`.
  Node* expect[kMaxRanks] = {};
  int64_t after[kMaxRanks] = {};
  // This rank's own lane collectives not completed yet, in issue order:
  // posted[head..].
  struct Posted {
    comm::Fingerprint fp;
    void* buf;
  };
  std::vector<Posted> posted;
  size_t head = 0;
  // The highest completed seq (-1: none): every peer's node of that
  // collective and the ones before it has been read. Read by Completed()
  // from any thread and by the peers deciding which nodes to reuse; on a
  // line of its own, away from the fields above that this rank writes at
  // every operation.
  alignas(64) std::atomic<int64_t> done{-1};
};

bool FastLanes::Enabled(int world_size, const Options& options) {
  return options.ranks == RankExecution::kThreads && world_size >= 2 &&
         world_size <= kMaxRanks;
}

bool FastLanes::Eligible(const comm::Fingerprint& fp) {
  return fp.op == comm::OpKind::kAllReduce && fp.reduce_op.has_value() &&
         fp.count >= 0 && fp.count <= kMaxBytes / comm::DTypeSize(fp.dtype);
}

FastLanes::FastLanes(int world_size)
    : world_size_(world_size),
      lanes_(std::make_unique<Lane[]>(world_size)),
      consumers_(std::make_unique<Consumer[]>(world_size)) {
  static_assert(
      sizeof(std::atomic<int64_t>) + sizeof(Node*) + sizeof(Node::Body) + 16 <=
          64,
      "a 16-byte all-reduce's data should share the node's first "
      "cache line with its header");
  // Every lane starts with an announced, unpublished node.
  for (int p = 0; p < world_size_; ++p) {
    Lane& lane = lanes_[p];
    lane.owned.push_back(std::make_unique<Node>());
    lane.announced = lane.owned.back().get();
    for (int r = 0; r < world_size_; ++r) {
      consumers_[r].expect[p] = lane.announced;
      consumers_[r].after[p] = -1;
    }
  }
}

FastLanes::~FastLanes() = default;

void FastLanes::Reclaim(int rank, bool look) {
  Lane& lane = lanes_[rank];
  if (look) {
    int64_t lowest = INT64_MAX;
    for (int p = 0; p < world_size_; ++p) {
      if (p == rank) continue;
      lowest =
          std::min(lowest, consumers_[p].done.load(std::memory_order_acquire));
    }
    lane.peers_done = lowest;
  }
  while (lane.in_use_head < lane.in_use.size() &&
         lane.in_use[lane.in_use_head]->seq.load(std::memory_order_relaxed) <=
             lane.peers_done) {
    lane.free.push_back(lane.in_use[lane.in_use_head++]);
  }
  // Drop the taken front once it is half the vector: amortised O(1), and
  // no allocation once the vector has its capacity (a deque would allocate
  // a block every few dozen operations).
  if (lane.in_use_head * 2 >= lane.in_use.size()) {
    lane.in_use.erase(
        lane.in_use.begin(),
        lane.in_use.begin() + static_cast<std::ptrdiff_t>(lane.in_use_head));
    lane.in_use_head = 0;
  }
}

bool FastLanes::ShouldLook(int rank) const {
  const Lane& lane = lanes_[rank];
  return lane.free.empty() &&
         lane.in_use.size() - lane.in_use_head >= kPoolDepth;
}

FastLanes::Node* FastLanes::TakeNode(int rank) {
  Lane& lane = lanes_[rank];
  if (lane.free.empty()) Reclaim(rank, /*look=*/false);
  // Below kPoolDepth nodes a new one is cheaper than looking at the peers
  // (a line from each, a wait of a cross-core transfer); past it, look
  // (that frees a run of nodes at once) and only then grow. Complete looks
  // ahead of time while it waits for a peer anyway, so a rank in step
  // with its peers rarely looks here.
  if (ShouldLook(rank)) Reclaim(rank, /*look=*/true);
  if (!lane.free.empty()) {
    Node* node = lane.free.back();
    lane.free.pop_back();
    return node;
  }
  // A deeper pipeline of un-completed collectives than so far: one more
  // node, kept for the group's life.
  lane.owned.push_back(std::make_unique<Node>());
  return lane.owned.back().get();
}

void FastLanes::Post(int rank, const comm::Fingerprint& fp, void* buf) {
  Lane& lane = lanes_[rank];
  Node* node = lane.announced;
  Node* next = TakeNode(rank);
  node->next = next;
  node->body.op = fp.op;
  node->body.dtype = fp.dtype;
  node->body.reduce_op = fp.reduce_op;
  node->body.root = fp.root;
  node->body.peer = fp.peer;
  node->body.count = fp.count;
  const int64_t bytes = fp.count * comm::DTypeSize(fp.dtype);
  if (bytes > 0) std::memcpy(node->data, buf, static_cast<size_t>(bytes));
  node->seq.store(fp.seq, std::memory_order_release);
  lane.in_use.push_back(node);
  lane.announced = next;
  consumers_[rank].posted.push_back({fp, buf});
}

void FastLanes::WakePeers(int rank) { lanes_[rank].event.Signal(); }

bool FastLanes::Completed(int rank, int64_t seq) const {
  return consumers_[rank].done.load(std::memory_order_acquire) >= seq;
}

void FastLanes::Wake(int rank) { lanes_[rank].event.Signal(); }

void FastLanes::WakeAll() {
  for (int p = 0; p < world_size_; ++p) lanes_[p].event.Signal();
}

absl::Status FastLanes::CheckPeer(Group& group, int rank, int peer,
                                  const comm::Fingerprint* next,
                                  const comm::Fingerprint& fp) {
  if (next != nullptr) {
    if (next->seq == fp.seq) {
      if (comm::SameCollective(*next, fp)) return absl::OkStatus();
      return Group::MismatchStatus(rank, fp, peer, *next);
    }
    // The peer's next lane collective is another one: at the lower of the
    // two numbers one of us issued a collective of the Slot path.
  } else if (group.collectives_issued_[peer].load(std::memory_order_acquire) <=
             fp.seq) {
    return absl::OkStatus();  // not issued yet
  }
  // Collective `m` went through a Slot on one side: the Slot names whoever
  // issued it first there.
  const int64_t m = next != nullptr ? std::min(next->seq, fp.seq) : fp.seq;
  const int lane_rank = next != nullptr && next->seq < fp.seq ? peer : rank;
  const comm::Fingerprint& lane_fp =
      next != nullptr && next->seq < fp.seq ? *next : fp;
  std::lock_guard<std::mutex> lock(group.mu_);
  auto it = group.open_collectives_.find(m);
  if (it == group.open_collectives_.end() || it->second == nullptr) {
    // Issued but not yet published (PostCollective counts first). Without
    // a node the caller looks again shortly; with one, the two lane
    // collectives themselves say enough.
    if (next == nullptr) return absl::OkStatus();
    return Group::MismatchStatus(rank, fp, peer, *next);
  }
  return Group::MismatchStatus(lane_rank, lane_fp, it->second->first_rank(),
                               it->second->reference());
}

AwaitResult FastLanes::AwaitNode(Group& group, int rank, int peer,
                                 const Node& expect, int64_t after,
                                 const comm::Fingerprint& fp,
                                 Deadline wait_deadline, Deadline op_deadline,
                                 absl::Time issued) {
  auto linked = [&] {
    return expect.seq.load(std::memory_order_acquire) > after;
  };
  // Spin first while ranks have cores of their own (sim/wait_policy.h).
  if (group.Spin(rank, wait_deadline, op_deadline, linked)) return {};
  // More ranks than cores (at most kMaxRanks here): yield the core a few
  // times before sleeping. A yield hands the core to a runnable rank (the
  // one this rank waits for, often) and finds the node published when it
  // comes back, where a futex sleep and wake-up costs each hop 5-10 us;
  // OpenMPI's oversubscribed processes poll the same way.
  if (group.world_size_ > group.cpus_ && wait_deadline != kPoll) {
    for (int i = 0; i < kYieldRounds; ++i) {
      std::this_thread::yield();
      if (linked()) return {};
      if (group.aborted()) break;
    }
  }
  const absl::Duration interval = group.options_.stall_note_interval;
  const bool notes = rank == 0 && interval > absl::ZeroDuration() &&
                     wait_deadline > Clock::now();
  Deadline next_note =
      notes ? DeadlineAfter(issued + interval - absl::Now()) : Deadline::max();
  EventWord& event = lanes_[peer].event;
  for (;;) {
    const uint32_t generation = event.generation();
    Deadline recheck = Deadline::max();
    if (linked()) return {};
    if (group.aborted()) {
      return {AwaitResult::Kind::kFailed, group.abort_reason()};
    }
    // A peer past this collective without a node issued it on the Slot
    // path: a mismatch (or it is being published: look again soon).
    if (group.collectives_issued_[peer].load(std::memory_order_acquire) >
        fp.seq) {
      if (linked()) return {};
      absl::Status mismatch = CheckPeer(group, rank, peer, nullptr, fp);
      if (!mismatch.ok()) {
        group.Abort(mismatch);
        return {AwaitResult::Kind::kFailed, group.abort_reason()};
      }
      recheck = Clock::now() + std::chrono::milliseconds(1);
    }
    if (group.num_exited_.load(std::memory_order_seq_cst) > 0) {
      std::unique_lock<std::mutex> lock(group.mu_);
      if (group.exited_[peer] && !linked() &&
          group.collectives_issued_[peer].load(std::memory_order_acquire) <=
              fp.seq) {
        absl::Status gone = absl::FailedPreconditionError(absl::StrCat(
            "sim: collective ", fp.DebugString(), " can never complete: rank ",
            peer, " (after issuing ",
            group.collectives_issued_[peer].load(std::memory_order_relaxed),
            " collectives) returned from its function without issuing it. "
            "Every rank must issue the same operations"));
        group.AbortLocked(gone);
        return {AwaitResult::Kind::kFailed, gone};
      }
    }
    const Deadline now = Clock::now();
    auto missing = [&] { return MissingRanks(group, rank); };
    if (now >= op_deadline) {
      std::unique_lock<std::mutex> lock(group.mu_);
      if (group.aborted()) {
        return {AwaitResult::Kind::kFailed, group.abort_reason_};
      }
      absl::Status timeout = absl::DeadlineExceededError(absl::StrCat(
          "sim: collective ", fp.DebugString(), " did not complete within ",
          absl::FormatDuration(group.options_.timeout), ": ", missing(),
          " never issued it. Check that every rank issues the same "
          "operations; raise sim::Options::timeout if a rank is legitimately "
          "that slow"));
      group.AbortLocked(timeout);
      return {AwaitResult::Kind::kFailed, timeout};
    }
    if (now >= wait_deadline) return {AwaitResult::Kind::kWaitTimeout, {}};
    if (now >= next_note) {
      comm::PrintStallNote(0, absl::StrCat("collective ", fp.DebugString()),
                           absl::Now() - issued,
                           absl::StrCat("not yet issued by ", missing()),
                           op_deadline == Deadline::max()
                               ? absl::InfiniteDuration()
                               : absl::FromChrono(op_deadline - Clock::now()));
      next_note = DeadlineAfter(interval);
    }
    // EventWord::Sleep caps each sleep at an hour (bounded even for
    // "infinite" deadlines).
    event.Sleep(generation,
                std::min({op_deadline, wait_deadline, next_note, recheck}));
  }
}

std::string FastLanes::MissingRanks(const Group& group, int rank) const {
  std::string out;
  const Consumer& me = consumers_[rank];
  for (int p = 0; p < world_size_; ++p) {
    if (p == rank ||
        me.expect[p]->seq.load(std::memory_order_acquire) > me.after[p]) {
      continue;
    }
    absl::StrAppend(
        &out, out.empty() ? "" : ", ", "rank ", p, " (it has issued ",
        group.collectives_issued_[p].load(std::memory_order_relaxed),
        " collectives)");
  }
  return out;
}

AwaitResult FastLanes::Complete(Group& group, int rank, int64_t seq,
                                Deadline wait_deadline, Deadline op_deadline,
                                absl::Time issued) {
  Consumer& me = consumers_[rank];
  // No abort check up front: a collective whose contributions are all
  // posted completes even if the run aborts meanwhile (as a Slot whose
  // tasks are done does); one still missing a contribution fails.
  while (me.head < me.posted.size() && me.posted[me.head].fp.seq <= seq) {
    const Consumer::Posted& op = me.posted[me.head];
    const void* srcs[kMaxRanks];
    Node* got[kMaxRanks] = {};
    for (int p = 0; p < world_size_; ++p) {
      if (p == rank) {
        srcs[p] = op.buf;
        continue;
      }
      Node* node = me.expect[p];
      int64_t number = node->seq.load(std::memory_order_acquire);
      if (number <= me.after[p]) {
        // Not there yet: the wait's first moments go to looking at the
        // peers' progress, which the next Post would otherwise stop for.
        if (ShouldLook(rank)) Reclaim(rank, /*look=*/true);
        AwaitResult r = AwaitNode(group, rank, p, *node, me.after[p], op.fp,
                                  wait_deadline, op_deadline, issued);
        if (r.kind != AwaitResult::Kind::kReached) return r;
        number = node->seq.load(std::memory_order_acquire);
      }
      const comm::Fingerprint theirs = node->Fingerprint(number);
      if (!comm::SameCollective(theirs, op.fp)) {
        if (absl::Status s = CheckPeer(group, rank, p, &theirs, op.fp);
            !s.ok()) {
          group.Abort(s);
          return {AwaitResult::Kind::kFailed, group.abort_reason()};
        }
      }
      got[p] = node;
      srcs[p] = node->data;
    }
    void* const dsts[] = {op.buf};
    absl::Status reduced = comm::ReduceInto(
        op.fp.dtype, *op.fp.reduce_op, op.fp.count,
        absl::MakeConstSpan(srcs, world_size_), dsts, world_size_);
    if (!reduced.ok()) {
      group.Abort(reduced);
      return {AwaitResult::Kind::kFailed, group.abort_reason()};
    }
    // Move past the nodes (their `next` read before `done` lets the owners
    // reuse them).
    for (int p = 0; p < world_size_; ++p) {
      if (p == rank) continue;
      me.after[p] = op.fp.seq;
      me.expect[p] = got[p]->next;
    }
    me.done.store(op.fp.seq, std::memory_order_release);
    if (++me.head == me.posted.size()) {
      me.posted.clear();  // keeps its capacity
      me.head = 0;
    }
  }
  if (!Completed(rank, seq)) {
    // Not posted on the lanes (cannot happen for a FastWork's own seq).
    return {AwaitResult::Kind::kFailed,
            absl::InternalError(absl::StrCat(
                "sim: rank ", rank, " has no lane collective #", seq))};
  }
  return {};
}

// ------------------------------------------------------------- FastWork ---

FastWork::FastWork(Group& group, int rank, comm::WorkRecord record,
                   Deadline op_deadline,
                   std::shared_ptr<std::atomic<bool>> released)
    : comm::Work(std::move(record)),
      group_(group),
      rank_(rank),
      op_deadline_(op_deadline),
      released_(std::move(released)) {}

FastWork::~FastWork() {
  if (finished_) return;
  group_.AbortIfUnwinding(rank_, record().fp);
  // Bounded by the operation timeout; ends at once if the run aborted.
  (void)Wait(absl::InfiniteDuration());
}

bool FastWork::Conclude(const AwaitResult& r) {
  switch (r.kind) {
    case AwaitResult::Kind::kReached:
      Finish(absl::OkStatus());
      return true;
    case AwaitResult::Kind::kFailed:
      Finish(absl::Status(
          r.status.code(),
          absl::StrCat("rank ", rank_, ": ", record().fp.DebugString(),
                       " failed: ", r.status.message())));
      return true;
    case AwaitResult::Kind::kWaitTimeout:
      return false;
  }
  return false;
}

bool FastWork::IsCompleted() {
  if (finished_) return true;
  FastLanes& lanes = *group_.fast_lanes();
  if (lanes.Completed(rank_, record().fp.seq)) {
    Finish(absl::OkStatus());
    return true;
  }
  return Conclude(lanes.Complete(group_, rank_, record().fp.seq, kPoll,
                                 op_deadline_, record().start));
}

absl::Status FastWork::Wait(absl::Duration timeout) {
  if (finished_) return status_;
  FastLanes& lanes = *group_.fast_lanes();
  const AwaitResult r =
      lanes.Complete(group_, rank_, record().fp.seq, DeadlineAfter(timeout),
                     op_deadline_, record().start);
  if (Conclude(r)) return status_;
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", rank_, ": ", record().fp.DebugString(),
      " has not completed after ", absl::FormatDuration(timeout),
      " (the Wait timeout; the operation is still in flight): not yet issued "
      "by ",
      lanes.MissingRanks(group_, rank_)));
}

void FastWork::Finish(absl::Status status) {
  finished_ = true;
  MarkEnded();
  status_ = std::move(status);
  released_->store(true, std::memory_order_release);
}

}  // namespace tandem::sim::internal
