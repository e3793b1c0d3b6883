#include "sim/group.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"
#include "comm/stall_note.h"
#include "comm/types.h"
#include "sim/cpu_relax.h"
#include "sim/fast_lane.h"
#include "sim/slot_pool.h"
#include "sim/wait_policy.h"

namespace tandem::sim::internal {
namespace {

bool IsPointToPoint(comm::OpKind op) {
  return op == comm::OpKind::kSend || op == comm::OpKind::kRecv;
}

// With fibers the workers are the only helpers and a woken helper costs a
// switch, not a kernel wake-up: slices small enough that every worker gets
// one of a 4 KiB all-reduce (no smaller than 1 KiB).
int64_t MinSliceBytes(const Options& options) {
  if (options.ranks != RankExecution::kFibers) return Slot::kMinSliceBytes;
  const int64_t workers =
      options.fiber_workers > 0
          ? options.fiber_workers
          : std::max(1u, std::thread::hardware_concurrency());
  return std::max<int64_t>(1 << 10, Slot::kMinSliceBytes / workers);
}

}  // namespace

Deadline DeadlineAfter(absl::Duration d) {
  // Beyond ~100 years is "never" (and would overflow the clock); no clock
  // read for it.
  if (d > absl::Hours(24 * 365 * 100)) return Deadline::max();
  const Deadline now = Clock::now();
  if (d <= absl::ZeroDuration()) return now;
  return now + absl::ToChronoNanoseconds(d);
}

Deadline OpDeadlineAfter(absl::Duration d) {
  if (d > absl::Hours(24 * 365 * 100)) return Deadline::max();
#if defined(CLOCK_MONOTONIC_COARSE)
  // One tick of the coarse clock (its resolution), read once per process.
  static const std::chrono::nanoseconds tick = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return std::chrono::seconds(res.tv_sec) +
           std::chrono::nanoseconds(res.tv_nsec);
  }();
  timespec ts{};
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) {
    const Deadline now(std::chrono::duration_cast<Clock::duration>(
        std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec) +
        tick));
    if (d <= absl::ZeroDuration()) return now;
    return now + absl::ToChronoNanoseconds(d);
  }
#endif
  return DeadlineAfter(d);
}

// ---------------------------------------------------------------- Group ---

Group::Group(int world_size, const Options& options)
    : Group(world_size, options, nullptr) {}

Group::Group(int world_size, const Options& options, Group* parent)
    : world_size_(world_size),
      options_(options),
      cpus_(UsableCpus()),
      spin_(EffectiveSpin(world_size, options, cpus_)),
      min_slice_bytes_(MinSliceBytes(options)),
      parent_(parent),
      sleeping_on_(std::make_unique<std::atomic<const Slot*>[]>(world_size)),
      ring_(std::make_unique<RingEntry[]>(kRing)),
      slot_pool_(std::make_shared<SlotPool>()),
      spin_budget_(spin_ > absl::ZeroDuration()
                       ? std::make_unique<SpinBudget[]>(world_size)
                       : nullptr),
      fast_(FastLanes::Enabled(world_size, options)
                ? std::make_unique<FastLanes>(world_size)
                : nullptr),
      collectives_issued_(world_size, /*padded=*/fast_ != nullptr),
      exited_(world_size, 0) {
  if (spin_budget_ != nullptr) {
    for (int r = 0; r < world_size; ++r) spin_budget_[r].Reset(spin_);
  }
}

Group::~Group() = default;

absl::StatusOr<std::shared_ptr<Slot>> Group::PostCollective(
    int rank, const comm::Fingerprint& fp, Endpoint endpoint,
    double issue_time_s) {
  if (aborted()) return abort_reason();
  // Release: a lane waiter that reads this count sees every node this rank
  // linked before (sim/fast_lane.h).
  collectives_issued_[rank].store(fp.seq + 1, std::memory_order_release);
  std::shared_ptr<Slot> slot = FindOrCreateCollective(rank, fp);
  // A peer waiting for this collective on its lane (a mismatch: it issued a
  // small all-reduce here) finds the slot now.
  if (fast_ != nullptr) fast_->Wake(rank);
  if (!comm::SameCollective(slot->reference_, fp)) {
    std::unique_lock<std::mutex> lock = Lock();
    absl::Status mismatch = MismatchLocked(*slot, rank, fp);
    AbortLocked(mismatch);
    return mismatch;
  }
  Arrive(*slot, rank, endpoint, issue_time_s);
  return slot;
}

std::shared_ptr<Slot> Group::FindOrCreateCollective(
    int rank, const comm::Fingerprint& fp) {
  // Fast path: the ring. An entry naming fp.seq stays so until this rank
  // has posted (the last post clears it).
  RingEntry& entry = ring_[fp.seq % kRing];
  if (entry.seq.load(std::memory_order_acquire) == fp.seq) {
    return entry.slot.load(std::memory_order_acquire)->shared_from_this();
  }
  {
    std::unique_lock<std::mutex> lock = Lock();
    if (world_size_ <= kBuildUnderLock &&
        open_collectives_.find(fp.seq) == open_collectives_.end()) {
      // A small slot (usually recycled: O(world size) stores) is cheaper to
      // build here than a second lock round trip.
      std::shared_ptr<Slot> created =
          slot_pool_->Take(fp, world_size_, min_slice_bytes_);
      created->first_rank_ = rank;
      Publish(entry, created);
      return created;
    }
    auto [it, inserted] = open_collectives_.emplace(fp.seq, nullptr);
    if (!inserted) {
      // Another rank creates it right now (a null entry): it is running, not
      // waiting on anything, so this ends within one slot construction.
      while (it->second == nullptr) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        it = open_collectives_.find(fp.seq);
      }
      return it->second;
    }
  }
  // The first poster: build the slot outside the lock (it is O(world
  // size)); the null entry keeps others from building their own.
  std::shared_ptr<Slot> created =
      slot_pool_->Take(fp, world_size_, min_slice_bytes_);
  created->first_rank_ = rank;
  std::unique_lock<std::mutex> lock = Lock();
  Publish(entry, created);
  return created;
}

void Group::Publish(RingEntry& entry, const std::shared_ptr<Slot>& slot) {
  const int64_t seq = slot->reference_.seq;
  open_collectives_[seq] = slot;
  if (entry.seq.load(std::memory_order_relaxed) == -1) {
    entry.slot.store(slot.get(), std::memory_order_release);
    entry.seq.store(seq, std::memory_order_release);
  }
}

void Group::Arrive(Slot& slot, int index, Endpoint endpoint,
                   double issue_time_s) {
  slot.endpoints_[index] = endpoint;
  slot.has_posted_[index].store(1, std::memory_order_relaxed);
  double latest = slot.latest_issue_s_.load(std::memory_order_relaxed);
  while (latest < issue_time_s &&
         !slot.latest_issue_s_.compare_exchange_weak(
             latest, issue_time_s, std::memory_order_relaxed)) {
  }
  if (slot.arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 !=
      slot.num_participants()) {
    return;
  }
  // The last poster: close the slot (no one will look it up again).
  const comm::Fingerprint& fp = slot.reference_;
  if (fp.op == comm::OpKind::kSend || fp.op == comm::OpKind::kRecv) {
    std::unique_lock<std::mutex> lock = Lock();
    open_p2p_.erase(std::make_tuple(slot.participant_ranks_[0],
                                    slot.participant_ranks_[1], fp.seq));
  } else {
    std::unique_lock<std::mutex> lock = Lock();
    RingEntry& entry = ring_[fp.seq % kRing];
    if (entry.seq.load(std::memory_order_relaxed) == fp.seq) {
      entry.seq.store(-1, std::memory_order_release);
      entry.slot.store(nullptr, std::memory_order_release);
    }
    open_collectives_.erase(fp.seq);
  }
  slot.ready_.store(true, std::memory_order_seq_cst);
  WakeHelpers(slot);
}

absl::StatusOr<std::shared_ptr<Slot>> Group::PostPointToPoint(
    int rank, int src, int dst, const comm::Fingerprint& fp, Endpoint endpoint,
    double issue_time_s) {
  std::shared_ptr<Slot> slot;
  const int index = rank == src ? 0 : 1;
  {
    std::unique_lock<std::mutex> lock = Lock();
    if (aborted()) return abort_reason_;
    (index == 0 ? sends_issued_ : recvs_issued_)[{src, dst}] = fp.seq + 1;
    const auto key = std::make_tuple(src, dst, fp.seq);
    auto it = open_p2p_.find(key);
    if (it == open_p2p_.end()) {
      slot =
          std::make_shared<Slot>(fp, std::vector<int>{src, dst}, world_size_);
      slot->first_rank_ = rank;
      open_p2p_.emplace(key, slot);
    } else {
      slot = it->second;
      const comm::Fingerprint& other = slot->reference_;
      const comm::Fingerprint& send = index == 0 ? fp : other;
      const comm::Fingerprint& recv = index == 0 ? other : fp;
      if (!comm::MatchingPointToPoint(send, recv)) {
        absl::Status mismatch = absl::FailedPreconditionError(absl::StrCat(
            "sim: point-to-point mismatch on message #", fp.seq, " from rank ",
            src, " to rank ", dst, ": rank ", src, " issued ",
            send.DebugString(), " but rank ", dst, " issued ",
            recv.DebugString(),
            ". A Send and its matching Recv must have the same dtype and "
            "count"));
        AbortLocked(mismatch);
        return mismatch;
      }
    }
  }
  Arrive(*slot, index, endpoint, issue_time_s);
  return slot;
}

AwaitResult Group::Await(int rank, const Slot& slot, Phase phase,
                         Deadline wait_deadline, Deadline op_deadline,
                         absl::Time issued) {
  auto reached = [&] {
    return phase == Phase::kReady ? slot.ready() : slot.tasks_done();
  };
  if (reached()) return {};
  if (Spin(rank, wait_deadline, op_deadline, reached)) return {};
  const absl::Duration interval = options_.stall_note_interval;
  const bool notes = rank == 0 && interval > absl::ZeroDuration() &&
                     wait_deadline > Clock::now();
  Deadline next_note =
      notes ? DeadlineAfter(issued + interval - absl::Now()) : Deadline::max();
  // Announce the slot before the checks below: an Abort or exit either
  // happens before them (and they see it) or finds us here and wakes us.
  sleeping_on_[rank].store(&slot, std::memory_order_seq_cst);
  sleeping_.fetch_add(1, std::memory_order_seq_cst);
  AwaitResult result;
  bool first_round = true;
  for (;;) {
    const uint32_t generation = slot.event_.generation();
    if (reached()) break;
    if (aborted()) {
      result = {AwaitResult::Kind::kFailed, abort_reason()};
      break;
    }
    if (phase == Phase::kReady &&
        num_exited_.load(std::memory_order_seq_cst) > 0) {
      std::unique_lock<std::mutex> lock = Lock();
      if (std::optional<absl::Status> stuck = ExitedMissingLocked(slot)) {
        AbortLocked(*stuck);
        result = {AwaitResult::Kind::kFailed, *stuck};
        break;
      }
    }
    // The first sleep of an unbounded Wait needs no clock read: the
    // operation's deadline was set at issue, and if it has passed already
    // the sleep returns at once and the next round checks it.
    const bool may_skip_clock = first_round && !notes &&
                                wait_deadline == Deadline::max() &&
                                op_deadline != Deadline::max();
    first_round = false;
    const Deadline now = may_skip_clock ? Deadline::min() : Clock::now();
    if (now >= op_deadline) {
      std::unique_lock<std::mutex> lock = Lock();
      if (aborted()) {
        result = {AwaitResult::Kind::kFailed, abort_reason_};
        break;
      }
      absl::Status timeout = TimeoutLocked(slot);
      AbortLocked(timeout);
      result = {AwaitResult::Kind::kFailed, timeout};
      break;
    }
    if (now >= wait_deadline) {
      result = {AwaitResult::Kind::kWaitTimeout, absl::OkStatus()};
      break;
    }
    if (now >= next_note) {
      std::unique_lock<std::mutex> lock = Lock();
      NoteLocked(slot, issued, op_deadline);
      next_note = DeadlineAfter(interval);
    }
    // EventWord::Sleep caps each sleep at an hour (bounded even for
    // "infinite" deadlines).
    slot.event_.Sleep(generation,
                      std::min({op_deadline, wait_deadline, next_note}));
  }
  sleeping_on_[rank].store(nullptr, std::memory_order_seq_cst);
  sleeping_.fetch_sub(1, std::memory_order_seq_cst);
  // A scanner may still be signalling `slot` through the pointer it read;
  // the caller may drop the slot once we return. Scans are short (no
  // blocking), so this ends quickly.
  while (scanners_.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::yield();
  }
  return result;
}

void Group::NoteLocked(const Slot& slot, absl::Time issued,
                       Deadline op_deadline) const {
  const absl::Time now = absl::Now();
  const std::string waiting =
      slot.ready()
          ? "every participant issued it; its data is "
            "still moving"
          : absl::StrCat("not yet issued by ", MissingRanksLocked(slot));
  comm::PrintStallNote(0, Describe(slot), now - issued, waiting,
                       op_deadline == Deadline::max()
                           ? absl::InfiniteDuration()
                           : absl::FromChrono(op_deadline - Clock::now()));
}

std::string Group::PendingDescription(const Slot& slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot.ready()) return "every participant has issued it";
  return absl::StrCat("not yet issued by ", MissingRanksLocked(slot));
}

void Group::AwaitQuiescent(int /*rank*/, const Slot& slot) {
  if (slot.active() == 0) return;
  for (int i = 0; i < 1000 && slot.active() != 0; ++i) CpuRelax();
  // A running task is a bounded memcpy or reduction; the short timed sleep
  // is a safety net, not the wake-up path (Slot::Help signals the slot when
  // its last active worker of an aborted run leaves).
  for (;;) {
    const uint32_t generation = slot.event_.generation();
    if (slot.active() == 0) return;
    slot.event_.Sleep(generation, Clock::now() + std::chrono::milliseconds(10));
  }
}

std::unique_lock<std::mutex> Group::Lock() {
  // The critical sections are short (a map lookup, a few stores). A blocked
  // std::mutex sleeps in the kernel, and waking it costs tens of
  // microseconds: while ranks have cores of their own, try a little first.
  if (spin_ > absl::ZeroDuration()) {
    for (int i = 0; i < 512; ++i) {
      if (mu_.try_lock())
        return std::unique_lock<std::mutex>(mu_, std::adopt_lock);
      CpuRelax();
    }
  }
  return std::unique_lock<std::mutex>(mu_);
}

void Group::AbortIfUnwinding(int rank, const comm::Fingerprint& fp) {
  if (std::uncaught_exceptions() == 0) return;
  Abort(absl::AbortedError(absl::StrCat("sim: rank ", rank,
                                        " threw an exception while ",
                                        fp.DebugString(), " was in flight")));
}

void Group::Abort(const absl::Status& reason) {
  std::vector<std::shared_ptr<Group>> children;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted()) return;  // also ends the parent <-> child recursion
    AbortLocked(reason);
    for (const auto& [key, child] : subgroups_) children.push_back(child);
  }
  // Outside the lock: groups lock only their own mutex, never two at once.
  for (const std::shared_ptr<Group>& child : children) child->Abort(reason);
  if (parent_ != nullptr) parent_->Abort(reason);
}

std::shared_ptr<Group> Group::SubGroup(int64_t split, int color, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Group>& g = subgroups_[{split, color}];
  if (g == nullptr) {
    Options options = options_;
    options.faults.clear();  // numbered by this group's collectives
    options.clock.reset();   // the clock models this group's network only
    options.capture = nullptr;
    g = std::make_shared<Group>(size, options, this);
    // A sub-group split from an aborted run starts aborted.
    if (aborted()) {
      std::lock_guard<std::mutex> child_lock(g->mu_);  // new, unshared
      g->AbortLocked(abort_reason_);
    }
  }
  return g;
}

void Group::AbortLocked(const absl::Status& reason) {
  if (aborted()) return;
  abort_reason_ = reason.ok() ? absl::AbortedError("sim: run aborted") : reason;
  aborted_.store(true, std::memory_order_seq_cst);
  abort_word_.Signal();
  WakeSleepers();
}

void Group::WakeSleepers() {
  if (fast_ != nullptr) fast_->WakeAll();
  if (sleeping_.load(std::memory_order_seq_cst) == 0) return;
  scanners_.fetch_add(1, std::memory_order_seq_cst);
  const Slot* last = nullptr;
  for (int r = 0; r < world_size_; ++r) {
    const Slot* slot = sleeping_on_[r].load(std::memory_order_seq_cst);
    // Most sleepers share one slot: signal it once per run of them.
    if (slot == nullptr || slot == last) continue;
    slot->event_.Signal();
    last = slot;
  }
  scanners_.fetch_sub(1, std::memory_order_seq_cst);
}

absl::Status Group::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

void Group::MarkExited(int rank) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    exited_[rank] = 1;
    num_exited_.fetch_add(1, std::memory_order_seq_cst);
  }
  // Only a sleeping rank can need to learn of the exit.
  WakeSleepers();
}

void Group::SleepUnlessAborted(int /*rank*/, absl::Duration d) {
  const Deadline until = DeadlineAfter(d);
  for (;;) {
    const uint32_t generation = abort_word_.generation();
    if (aborted() || Clock::now() >= until) return;
    abort_word_.Sleep(generation, until);
  }
}

void Group::Wake(const Slot& slot) { slot.event_.Signal(); }

void Group::WakeHelpers(const Slot& slot) {
  // A slot without tasks (a barrier, empty buffers) is done as soon as it
  // is ready: nobody will run a last task to wake the others.
  if (spin_ > absl::ZeroDuration() || slot.num_participants() <= 2 ||
      slot.tasks_done()) {
    Wake(slot);
    return;
  }
  // More ranks than cores: as many helpers as there are cores (and tasks)
  // move the data; waking every participant would cost a context switch
  // each for no extra parallelism, and Help's last task wakes everyone once
  // it is all done. At least one is woken even for a single task: the last
  // poster may wait on another operation first, and this one must still
  // complete.
  int64_t hw = cpus_;
  if (options_.ranks == RankExecution::kFibers) {
    // The fiber workers (sim/fiber.h: one per hardware thread by default).
    hw = std::max<int64_t>(1, options_.fiber_workers > 0
                                  ? options_.fiber_workers
                                  : std::thread::hardware_concurrency());
  }
  slot.event_.Signal(static_cast<int>(std::min(hw, slot.total_tasks_)));
}

std::string Group::Describe(const Slot& slot) {
  const comm::Fingerprint& fp = slot.reference_;
  if (IsPointToPoint(fp.op)) {
    return absl::StrCat("message #", fp.seq, " from rank ",
                        slot.participant_ranks_[0], " to rank ",
                        slot.participant_ranks_[1], " (",
                        comm::DTypeName(fp.dtype), " x ", fp.count, ")");
  }
  return absl::StrCat("collective ", fp.DebugString());
}

absl::Status Group::MismatchLocked(const Slot& slot, int rank,
                                   const comm::Fingerprint& fp) {
  // Every poster so far matched the first one's fingerprint (the reference).
  return MismatchStatus(rank, fp, slot.first_rank_, slot.reference_);
}

absl::Status Group::MismatchStatus(int rank_a, const comm::Fingerprint& a,
                                   int rank_b, const comm::Fingerprint& b) {
  // Name the lower rank first so two-rank messages read the same every run.
  const bool swap = rank_b < rank_a;
  const int lo = swap ? rank_b : rank_a;
  const int hi = swap ? rank_a : rank_b;
  const comm::Fingerprint& flo = swap ? b : a;
  const comm::Fingerprint& fhi = swap ? a : b;
  return absl::FailedPreconditionError(absl::StrCat(
      "sim: collective mismatch at collective #", std::min(a.seq, b.seq),
      ": rank ", lo, " issued ", flo.DebugString(), " but rank ", hi,
      " issued ", fhi.DebugString(),
      ". Every rank must issue the same collectives in the same order, with "
      "the same dtype, count, root and reduce op"));
}

std::string Group::MissingRanksLocked(const Slot& slot) const {
  // At most this many ranks are described; the rest are counted (a line
  // naming 8000 ranks helps nobody).
  constexpr int kMaxNamed = 8;
  std::vector<std::string> parts;
  int64_t unnamed = 0;
  const comm::Fingerprint& fp = slot.reference_;
  for (int p = 0; p < slot.num_participants(); ++p) {
    if (slot.has_posted_[p].load(std::memory_order_relaxed)) continue;
    if (parts.size() == kMaxNamed) {
      ++unnamed;
      continue;
    }
    const int r = slot.participant_ranks_[p];
    std::string state;
    if (IsPointToPoint(fp.op)) {
      const int src = slot.participant_ranks_[0];
      const int dst = slot.participant_ranks_[1];
      if (p == 0) {
        auto it = sends_issued_.find({src, dst});
        state = absl::StrCat("the matching Send; it has issued ",
                             it == sends_issued_.end() ? 0 : it->second,
                             " Sends to rank ", dst);
      } else {
        auto it = recvs_issued_.find({src, dst});
        state = absl::StrCat("the matching Recv; it has issued ",
                             it == recvs_issued_.end() ? 0 : it->second,
                             " Recvs from rank ", src);
      }
    } else {
      state =
          absl::StrCat("it has issued ",
                       collectives_issued_[r].load(std::memory_order_relaxed),
                       " collectives");
    }
    if (exited_[r]) absl::StrAppend(&state, " and returned from its function");
    parts.push_back(absl::StrCat("rank ", r, " (", state, ")"));
  }
  std::string out = absl::StrJoin(parts, ", ");
  if (unnamed > 0) absl::StrAppend(&out, " and ", unnamed, " more rank(s)");
  return out;
}

std::optional<absl::Status> Group::ExitedMissingLocked(const Slot& slot) const {
  std::vector<std::string> gone;
  for (int p = 0; p < slot.num_participants(); ++p) {
    const int r = slot.participant_ranks_[p];
    if (slot.has_posted_[p].load(std::memory_order_relaxed) || !exited_[r]) {
      continue;
    }
    if (IsPointToPoint(slot.reference_.op)) {
      gone.push_back(absl::StrCat("rank ", r));
    } else {
      gone.push_back(
          absl::StrCat("rank ", r, " (after issuing ",
                       collectives_issued_[r].load(std::memory_order_relaxed),
                       " collectives)"));
    }
  }
  if (gone.empty()) return std::nullopt;
  return absl::FailedPreconditionError(absl::StrCat(
      "sim: ", Describe(slot),
      " can never complete: ", absl::StrJoin(gone, ", "),
      " returned from its function without issuing it. Every rank must issue "
      "the same operations"));
}

absl::Status Group::TimeoutLocked(const Slot& slot) const {
  if (!slot.ready()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "sim: ", Describe(slot), " did not complete within ",
        absl::FormatDuration(options_.timeout), ": ", MissingRanksLocked(slot),
        " never issued it. Check that every rank issues the same operations; "
        "raise sim::Options::timeout if a rank is legitimately that slow"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "sim: ", Describe(slot), " did not complete within ",
      absl::FormatDuration(options_.timeout),
      ": every participant issued it but its data movement did not finish "
      "(the machine may be heavily oversubscribed; raise "
      "sim::Options::timeout)"));
}

}  // namespace tandem::sim::internal
