// The shared state of one simulated cluster: the rendezvous of every
// operation (Slot) and the group that owns them (Group). Internal to sim;
// users see sim::Run and comm::Communicator.
//
// Protocol of one operation (a collective, or one Send/Recv pair; a small
// all-reduce among 2-8 thread ranks takes the lanes of sim/fast_lane.h
// instead, which share this group's checks):
//   1. Post. Each participant, when it issues the operation, publishes its
//      buffers in the operation's Slot and compares its fingerprint with the
//      first poster's (the slot's reference). The first poster creates the
//      slot (under the group mutex, which keeps the open slots by sequence
//      number). A collective's slot is also published in a small ring
//      indexed by sequence number, where later posters find it without the
//      mutex: their arrival is one atomic increment. The last poster marks
//      the slot ready.
//   2. Move. Once ready, the data movement is a fixed set of tasks (chunks of
//      at most kChunkBytes per buffer), split into one group of tasks per
//      "home" participant: for an all-reduce, group r is rank r's slice of
//      the elements, reduced reading every rank's buffer directly and
//      written straight into every rank's buffer (reduce-scatter and
//      all-gather in one pass, no staging copy). Any participant that waits
//      claims tasks, its own group first, then the others' (so an operation
//      completes even while some participant is busy elsewhere). A task is
//      claimed once (atomic counter per group) and does the same arithmetic
//      whoever runs it: results do not depend on the schedule.
//   3. Complete. When the last task is done, every participant's Work is
//      complete. Waiters spin briefly (only when ranks <= usable CPUs;
//      sim/wait_policy.h),
//      then sleep on the slot's own event word (sim/futex.h): no mutex is
//      taken to sleep or to wake, and the thread that finishes the last
//      task wakes every sleeper of the slot with one system call. When the
//      slot becomes ready with more ranks than cores, only as many sleepers
//      as there are cores (and tasks) are woken to help move the data; the
//      rest sleep on until it is done, so a rank is woken once per
//      operation, not twice.
// Failure: Group::Abort() records the first reason, stops task claiming, and
// wakes every waiter (it signals the slot each sleeping rank has announced,
// see Group::sleeping_on_); a failed Work returns only once no task touches
// its buffers any more.
#ifndef TANDEM_SIM_GROUP_H_
#define TANDEM_SIM_GROUP_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"
#include "comm/types.h"
#include "sim/cpu_relax.h"
#include "sim/futex.h"
#include "sim/options.h"
#include "sim/wait_policy.h"

namespace tandem::sim::internal {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Now + d, saturating (an infinite or huge duration gives Deadline::max()).
Deadline DeadlineAfter(absl::Duration d);

// An operation's deadline, set when it is issued: now + d on the coarse
// monotonic clock (the same clock as Clock, read at its tick, ~13 ns here
// against ~70 ns for Clock::now() on this VM, once per operation and rank),
// plus one tick so that it is never earlier than DeadlineAfter(d) would
// be. So the operation timeout may fire up to one tick (a few ms) late,
// never early. Saturates as DeadlineAfter does.
Deadline OpDeadlineAfter(absl::Duration d);

// The wait deadline of a poll (IsCompleted): already passed, known without
// reading the clock; a poll never spins or sleeps.
inline constexpr Deadline kPoll = Deadline::min();

// One participant's buffers. AllReduce/Broadcast: send == recv == the buffer.
// Send: only `send`. Recv: only `recv`. Barrier: neither.
struct Endpoint {
  const void* send = nullptr;
  void* recv = nullptr;
};

class FastLanes;
class Group;
class SlotPool;

// The rendezvous and the data movement of one operation.
class Slot : public std::enable_shared_from_this<Slot> {
 public:
  // The most bytes of one buffer a task touches.
  static constexpr int64_t kChunkBytes = 128 << 10;
  // The fewest bytes of an all-reduce slice (bar the last).
  static constexpr int64_t kMinSliceBytes = 4 << 10;

  // `participant_ranks`: who takes part, by participant index (all ranks for
  // a collective; {sender, receiver} for a Send/Recv pair).
  // `min_slice_bytes`: the fewest bytes of an all-reduce slice (bar the
  // last); the results do not depend on it, only who computes which slice.
  Slot(const comm::Fingerprint& reference, std::vector<int> participant_ranks,
       int world_size, int64_t min_slice_bytes = kMinSliceBytes);

  // Makes this slot equal to a new Slot(reference, {0, ..., world_size - 1},
  // world_size, min_slice_bytes) of a collective, keeping the capacity of
  // its arrays (sim/slot_pool.h recycles slots this way, so an operation
  // allocates nothing). Requires that nobody else uses the slot.
  void ResetCollective(const comm::Fingerprint& reference, int world_size,
                       int64_t min_slice_bytes);

  // The first poster's fingerprint.
  const comm::Fingerprint& reference() const { return reference_; }
  // Who posted first (whose fingerprint reference() is).
  int first_rank() const { return first_rank_; }
  const std::vector<int>& participant_ranks() const {
    return participant_ranks_;
  }
  int num_participants() const {
    return static_cast<int>(participant_ranks_.size());
  }

  // Every participant has posted; buffers are published.
  bool ready() const { return ready_.load(std::memory_order_seq_cst); }
  // Every task has run: the results are in place.
  bool tasks_done() const {
    return ready() && done_.load(std::memory_order_seq_cst) == total_tasks_;
  }
  // Threads currently running tasks (or about to claim one).
  int active() const { return active_.load(std::memory_order_seq_cst); }

  // Runs unclaimed tasks, group `home` first, until none is left, `max_tasks`
  // have run, or the group aborts. Wakes the group's waiters when it finishes
  // the last task, or when it is the last active worker of an aborted group.
  // Requires ready(). Returns the number of tasks run.
  int64_t Help(int home, Group& group, int64_t max_tasks);

  // The network clock (sim/network_clock.h): the latest simulated issue time
  // among the participants, seconds. Requires ready() (fixed from then on).
  double latest_issue_s() const {
    return latest_issue_s_.load(std::memory_order_relaxed);
  }

 private:
  friend class Group;

  void Plan();
  absl::Status RunTask(int g, int64_t t);
  int64_t TasksOfGroup(int g) const { return tasks_per_group_[g]; }

  // Fixed from construction (or ResetCollective) until the slot is freed.
  comm::Fingerprint reference_;
  std::vector<int> participant_ranks_;
  int world_size_;
  int64_t elem_size_;
  int64_t min_slice_bytes_;
  int64_t chunk_elems_ = 1;

  // Posting: each participant writes its own entries, then counts itself in
  // arrived_ (acq_rel: the last poster sees every endpoint). Read-only once
  // ready; has_posted_ is also read by diagnostics while posts go on.
  std::vector<Endpoint> endpoints_;
  std::unique_ptr<std::atomic<char>[]> has_posted_;
  int64_t has_posted_capacity_ = 0;
  int first_rank_ = -1;  // who created the slot (its fingerprint: reference_)
  std::atomic<int> arrived_{0};
  std::atomic<double> latest_issue_s_{0};
  std::atomic<bool> ready_{false};

  // Task plan (fixed at construction from the fingerprint).
  std::vector<int64_t> group_begin_;  // AllReduce: element partition, n + 1.
  std::vector<int64_t> tasks_per_group_;
  int64_t total_tasks_ = 0;

  // One claim counter per task group, at claim_[g * claim_stride_]: a cache
  // line each for up to 64 groups (helpers claiming from neighbouring
  // groups do not contend), packed beyond (a slot of 8192 ranks would
  // otherwise zero 512 KiB per operation, and only a few helpers claim at a
  // time there).
  int64_t claim_stride_ = 1;
  std::unique_ptr<std::atomic<int64_t>[]> claim_;
  int64_t claim_capacity_ = 0;
  alignas(64) std::atomic<int> scan_{0};  // Help: first group maybe not drained
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<int> active_{0};
  // Waiters of this slot sleep on it (Group::Await); signalled when the slot
  // becomes ready, when its last task finishes, and on abort or a rank's
  // exit. Mutable: waiting and waking do not change the slot's state.
  alignas(64) mutable EventWord event_;
};

// Outcome of waiting for a slot.
struct AwaitResult {
  enum class Kind {
    kReached,      // the condition holds
    kFailed,       // the run aborted (status says why); the op has failed
    kWaitTimeout,  // the caller's own timeout passed; the op is still live
                   // (status is OK: the caller describes it if it wants)
  };
  Kind kind = Kind::kReached;
  absl::Status status;
};

class Group {
 public:
  Group(int world_size, const Options& options);
  // A sub-group (SubGroup): `parent` outlives it.
  Group(int world_size, const Options& options, Group* parent);
  ~Group();

  int world_size() const { return world_size_; }
  // The small all-reduce path (sim/fast_lane.h); null when this group has
  // none (fibers, more than FastLanes::kMaxRanks ranks).
  FastLanes* fast_lanes() const { return fast_.get(); }
  // Counts `rank`'s lane collective `seq` as issued (after FastLanes::Post;
  // the diagnostics and the lanes' mismatch check read it).
  void CountIssued(int rank, int64_t seq) {
    collectives_issued_[rank].store(seq + 1, std::memory_order_release);
  }
  // "sim: collective mismatch at collective #3: rank 0 issued ... but rank 1
  // issued ...", the lower rank named first.
  static absl::Status MismatchStatus(int rank_a, const comm::Fingerprint& a,
                                     int rank_b, const comm::Fingerprint& b);
  const Options& options() const { return options_; }

  // Posts `rank`'s part of its collective `fp.seq`. Returns the slot, or the
  // abort reason if the run has aborted (or aborts now, on a mismatch).
  // `issue_time_s`: the rank's simulated clock at issue (0 when the network
  // clock is off); the slot keeps the latest.
  absl::StatusOr<std::shared_ptr<Slot>> PostCollective(
      int rank, const comm::Fingerprint& fp, Endpoint endpoint,
      double issue_time_s = 0);
  // Posts a Send (rank == src) or Recv (rank == dst) of message `fp.seq` on
  // the (src, dst) pair.
  absl::StatusOr<std::shared_ptr<Slot>> PostPointToPoint(
      int rank, int src, int dst, const comm::Fingerprint& fp,
      Endpoint endpoint, double issue_time_s = 0);

  enum class Phase { kReady, kTasksDone };
  // Rank `rank` waits until `slot` reaches `phase`. Fails (and aborts the
  // run) when the op's deadline passes or when a participant that never
  // posted has exited; returns kWaitTimeout when `wait_deadline` passes
  // first. At most one thread per rank waits at a time. While rank 0 waits
  // (with a wait deadline in the future), it writes a "still waiting for"
  // line to stderr every Options::stall_note_interval after `issued` (the
  // operation's issue time).
  AwaitResult Await(int rank, const Slot& slot, Phase phase,
                    Deadline wait_deadline, Deadline op_deadline,
                    absl::Time issued);
  // "not yet issued by rank 1 (it has issued 0 collectives)", for messages.
  std::string PendingDescription(const Slot& slot) const;
  // Waits until no thread runs tasks of `slot`. Only called after an abort
  // (task claiming has stopped), so it ends quickly.
  void AwaitQuiescent(int rank, const Slot& slot);

  // Fails the run: the first reason is kept and returned by every wait.
  void Abort(const absl::Status& reason);
  // During an exception's unwinding (a rank destroying its Work of `fp`,
  // still in flight, as it goes down): aborts the run naming both.
  void AbortIfUnwinding(int rank, const comm::Fingerprint& fp);
  bool aborted() const { return aborted_.load(std::memory_order_seq_cst); }
  // The abort reason (OK if not aborted).
  absl::Status abort_reason() const;

  // `rank`'s function has returned (or, in a sub-group, its communicator
  // was destroyed); waits that need it fail at once.
  void MarkExited(int rank);

  // The group of the `size` ranks that chose `color` in this group's split
  // number `split` (every member asks with the same arguments and gets the
  // same group); created by the first to ask, with this group's timeout,
  // spin and stall notes but no faults and no network clock. It lives as
  // long as this group. Abort() of either one aborts the other (a failing
  // rank fails every communicator of the run, as a crash would).
  std::shared_ptr<Group> SubGroup(int64_t split, int color, int size);

  // Rank `rank` sleeps `d` unless the run aborts first.
  void SleepUnlessAborted(int rank, absl::Duration d);

  // Rank `rank` spins until `reached()` (true), the spin its SpinBudget
  // grants runs out, either deadline passes or the run aborts (false).
  // Cheap checks, a clock read every 64 rounds; none before the 64th round,
  // where the spin's budget starts counting: most waits between two ranks
  // that have a core each end within those rounds, and a clock read costs
  // as much as the rest of a small all-reduce's wait. No spin (and the
  // budget left alone) when this group does not spin or the wait is a poll
  // (kPoll). For Await and the lanes' waits.
  template <typename Reached>
  bool Spin(int rank, Deadline wait_deadline, Deadline op_deadline,
            Reached reached);

  // Wakes the sleeping participants of `slot` after a change of its state
  // (no system call when nobody sleeps). Only they are woken: with many
  // ranks on few cores, waking everyone on every change would cost more than
  // the change. Never blocks; takes no lock.
  void Wake(const Slot& slot);

  // `slot` became ready: wakes the participants blocked on it when ranks
  // have cores of their own; otherwise only as many as there are cores (the
  // helpers that move its data; the rest sleep until it is done).
  void WakeHelpers(const Slot& slot);

 private:
  friend class FastLanes;  // its waits share this group's checks

  // Locks mu_, spinning on try_lock first while spinning is allowed.
  std::unique_lock<std::mutex> Lock() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Wakes every slot a rank sleeps on (abort, exit). Never blocks.
  void WakeSleepers();

  absl::Status MismatchLocked(const Slot& slot, int rank,
                              const comm::Fingerprint& fp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AbortLocked(const absl::Status& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<absl::Status> ExitedMissingLocked(const Slot& slot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TimeoutLocked(const Slot& slot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingRanksLocked(const Slot& slot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "rank 0: still waiting for collective #3 AllReduce(f32 x 8, sum) for 30s;
  // not yet issued by rank 2 (it has issued 3 collectives); timeout in 4m30s"
  // to stderr.
  void NoteLocked(const Slot& slot, absl::Time issued,
                  Deadline op_deadline) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "collective #3 AllReduce(f32 x 8, sum)" or "Send #0 from rank 1 to rank 0".
  static std::string Describe(const Slot& slot);
  // The open slot of collective `seq`: from the ring, else from the map
  // (created, outside the lock, when absent).
  std::shared_ptr<Slot> FindOrCreateCollective(int rank,
                                               const comm::Fingerprint& fp);
  struct RingEntry;
  // Makes `slot` (just created, with its fingerprint) open: in the map, and
  // in `entry` (its ring entry) unless an older open collective holds it.
  void Publish(RingEntry& entry, const std::shared_ptr<Slot>& slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `rank`'s post in `slot` (endpoint and fingerprint already
  // checked); the last poster closes the slot and wakes its helpers.
  void Arrive(Slot& slot, int index, Endpoint endpoint, double issue_time_s);

  const int world_size_;
  const Options options_;
  const int cpus_;             // UsableCpus() at construction
  const absl::Duration spin_;  // sim/wait_policy.h: zero when ranks > cpus_
  // Slot's min_slice_bytes: with fibers, small enough that each worker has
  // a slice of a 4 KiB all-reduce to reduce.
  const int64_t min_slice_bytes_;
  Group* const parent_ = nullptr;  // the group this one was split from

  mutable std::mutex mu_;
  std::atomic<bool> aborted_{false};
  absl::Status abort_reason_ ABSL_GUARDED_BY(mu_);
  // SleepUnlessAborted sleeps on it; Abort signals it.
  EventWord abort_word_;

  // The slot each rank sleeps on in Await (null when it does not), so that
  // Abort and MarkExited can wake it without a mutex on the waiting path. A
  // reader (a "scanner") counts itself in scanners_ while it dereferences
  // the pointers; a waiter clears its entry and then waits for scanners_ to
  // drop to zero before it may let go of the slot (a hazard-pointer scheme:
  // the slot outlives every scanner's use of it).
  std::unique_ptr<std::atomic<const Slot*>[]> sleeping_on_;
  std::atomic<int> sleeping_{0};  // non-null entries of sleeping_on_
  std::atomic<int> scanners_{0};

  // Slots some participant has posted and some has not, by stream. The map
  // owns an open collective's slot; the ring is a lock-free index of (most
  // of) them: entry s % kRing names slot s while it is open, unless an older
  // open slot held the entry when s was created. Ring entries are written
  // under mu_ (publish on creation, clear on the last post) and read without
  // it: a reader that finds seq == s may use the slot, which stays open (and
  // alive) at least until that reader has posted.
  static constexpr int kRing = 256;
  // Up to this many ranks the first poster builds (or recycles) a
  // collective's slot under mu_; beyond, outside it (O(world size) work
  // that the other ranks would queue behind).
  static constexpr int kBuildUnderLock = 64;
  struct alignas(64) RingEntry {
    std::atomic<int64_t> seq{-1};
    std::atomic<Slot*> slot{nullptr};
  };
  std::unique_ptr<RingEntry[]> ring_;
  // A hash map: erasing keeps its storage, so the open/close of every
  // collective allocates nothing (a std::map allocated a node each time).
  absl::flat_hash_map<int64_t, std::shared_ptr<Slot>> open_collectives_
      ABSL_GUARDED_BY(mu_);
  // Recycles collective slots (sim/slot_pool.h).
  const std::shared_ptr<SlotPool> slot_pool_;
  // Each rank's adaptive spin (sim/wait_policy.h); null when spin_ is zero
  // (more ranks than CPUs, fibers): nothing per rank at 8192 ranks.
  const std::unique_ptr<SpinBudget[]> spin_budget_;
  // The small all-reduce path; null when the group has none.
  const std::unique_ptr<FastLanes> fast_;
  std::map<std::tuple<int, int, int64_t>, std::shared_ptr<Slot>> open_p2p_
      ABSL_GUARDED_BY(mu_);
  // Diagnostics: collectives issued and exit state per rank; messages issued
  // per (src, dst) by the sender and by the receiver.
  // Each rank's count on a cache line of its own in groups with lanes (every
  // rank stores its count at every collective: packed, two ranks' stores
  // would pull one line back and forth on every small all-reduce); packed
  // in bigger groups, where memory per rank matters more (8192 ranks).
  class IssuedCounts {
   public:
    IssuedCounts(int world_size, bool padded)
        : stride_(padded ? 64 / sizeof(std::atomic<int64_t>) : 1),
          counts_(std::make_unique<std::atomic<int64_t>[]>(
              static_cast<size_t>(world_size) * stride_)) {}
    std::atomic<int64_t>& operator[](int rank) {
      return counts_[static_cast<size_t>(rank) * stride_];
    }
    const std::atomic<int64_t>& operator[](int rank) const {
      return counts_[static_cast<size_t>(rank) * stride_];
    }

   private:
    const size_t stride_;
    // Padded entries are 64 bytes apart: never on one line, however the
    // array is aligned.
    std::unique_ptr<std::atomic<int64_t>[]> counts_;
  };
  IssuedCounts collectives_issued_;
  std::vector<char> exited_ ABSL_GUARDED_BY(mu_);
  // Written under mu_; read without it by Await's fast check.
  std::atomic<int> num_exited_{0};
  std::map<std::pair<int, int>, int64_t> sends_issued_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, int64_t> recvs_issued_ ABSL_GUARDED_BY(mu_);
  // Groups split from this one, by (split number, color).
  std::map<std::pair<int64_t, int>, std::shared_ptr<Group>> subgroups_
      ABSL_GUARDED_BY(mu_);
};

template <typename Reached>
bool Group::Spin(int rank, Deadline wait_deadline, Deadline op_deadline,
                 Reached reached) {
  if (spin_budget_ == nullptr || wait_deadline == kPoll) return false;
  const int64_t budget_ns = spin_budget_[rank].Next();
  if (budget_ns <= 0) return false;
  Deadline spin_until = Deadline::max();  // set at the first clock read
  bool met = false;
  for (uint32_t i = 1;; ++i) {
    if (reached()) {
      met = true;
      break;
    }
    if (aborted()) break;
    if ((i & 63) == 0) {
      const Deadline now = Clock::now();
      if (i == 64) {
        spin_until = std::min({now + std::chrono::nanoseconds(budget_ns),
                               wait_deadline, op_deadline});
      }
      if (now >= spin_until) break;
    }
    CpuRelax();
  }
  spin_budget_[rank].Ended(budget_ns, met);
  return met;
}

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_GROUP_H_
