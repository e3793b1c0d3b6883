// The small all-reduce path of the simulated cluster (ranks as threads, up to
// kMaxRanks of them): a lane per rank instead of a shared Slot.
//
// Why: a 2-rank all-reduce of 8 bytes through a Slot (sim/group.h) costs
// about 30 cache-line transfers between the two cores (the group mutex
// twice, the open-collective map, the slot's reset and its counters, the
// shared_ptr's count, the task claim and done counters), 1.3-4.5 us in
// all, where a shared-memory MPI takes 0.3-0.5 us. Here each rank writes
// only its own lane and reads the others': about two line transfers per
// peer and operation.
//
// Protocol. Rank r's lane is a chain of nodes, one per small all-reduce r
// has issued, in issue order; only r writes them. Each node names the node
// r's next lane collective will use, chosen when this one is published, so
// a peer always knows where to look next. Posting copies r's contribution
// (at most kMaxBytes) and the fingerprint into the announced node,
// publishes the collective's number in it (release), bumps the lane's event
// word and returns: it never blocks, and r's peers can complete the
// operation whether or not r ever waits. Completing collective s on rank r
// (in Wait or IsCompleted, on r's own thread) waits at every peer p's
// announced node (spin, then sleep on p's event word, as
// sim/wait_policy.h decides) until it is published; checks that its number
// is s and its fingerprint equals r's (else the run aborts with a
// collective mismatch, naming both ranks and both collectives); and reduces
// every rank's contribution in rank order into r's buffer with
// comm::ReduceInto: the same arithmetic as the Slot path, so the same bits.
// A rank completes its small all-reduces in issue order (waiting for s
// completes the ones before it first) and then publishes s as its `done`.
// Each rank writes only its own buffer, so a failure needs no quiescence
// wait.
//
// Nodes are reused once every peer's `done` has passed them; an owner looks
// at its peers' `done` only when it has no node known to be free and at
// least kPoolDepth in use (and looks ahead of time while it waits for a
// peer), else it takes a new one: no allocation per
// operation once warm, and a rank may have any number of small all-reduces
// in flight. What an operation moves between two cores is the one line a
// peer spins on (header and first 16 bytes of data together) and the data's
// other lines; nothing is written by two ranks (the earlier design's
// per-node release counts and free lists cost three more transfers each
// way, each on the critical path).
//
// Which collectives take it: Eligible() is a function of the fingerprint
// alone, and every rank of a group decides alike, so a correct program
// never mixes the two paths for one collective. A wrong one may (rank 0
// all-reduces 2 floats, rank 1 a million): a rank completing a lane
// collective notices a peer that issued that collective without a node
// (its collectives_issued count moved past it) and aborts the run with the
// mismatch, naming the Slot's fingerprint.
//
// Every check of the Slot path stays: fingerprints, the operation timeout
// (the run aborts naming the ranks that never issued it), ranks that
// returned without issuing it, aborts (Group::Abort wakes lane sleepers),
// rank 0's stall notes and the Wait timeout.
#ifndef TANDEM_SIM_FAST_LANE_H_
#define TANDEM_SIM_FAST_LANE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/fingerprint.h"
#include "comm/work.h"
#include "sim/block_cache.h"
#include "sim/futex.h"
#include "sim/group.h"

namespace tandem::sim::internal {

class FastLanes {
 public:
  // Groups of at most this many ranks have lanes (each rank reads every
  // peer's contribution: O(n^2) traffic, fine for small n).
  static constexpr int kMaxRanks = 8;
  // The largest all-reduce (bytes of one rank's buffer) on the lanes. At
  // 4 KiB the Slot path's machinery is still most of its time; from a few
  // KiB on, reading every peer's whole buffer costs more than the Slot
  // path's split of the reduction.
  static constexpr int64_t kMaxBytes = 4 << 10;
  // Nodes a lane takes before it looks at its peers' progress to reuse one
  // (bench: fewer looks per operation; memory: kPoolDepth x 4 KiB per rank).
  static constexpr size_t kPoolDepth = 16;
  // With more ranks than cores, the yields a waiting rank makes before it
  // sleeps on its peer's event word.
  static constexpr int kYieldRounds = 64;

  // Whether a group of `world_size` ranks run as `options.ranks` has lanes.
  static bool Enabled(int world_size, const Options& options);
  // Whether collective `fp` takes the lanes (in a group that has them): an
  // all-reduce of at most kMaxBytes. A function of the fingerprint only.
  static bool Eligible(const comm::Fingerprint& fp);

  explicit FastLanes(int world_size);
  ~FastLanes();
  FastLanes(const FastLanes&) = delete;
  FastLanes& operator=(const FastLanes&) = delete;

  // Rank `rank` issues its lane collective `fp` (fp.seq above every earlier
  // one of this rank) on `buf` (fp.count elements, in place): its
  // contribution is copied and published now; peers spinning on it see it,
  // peers asleep need WakePeers. Never blocks. Called by the rank's thread
  // only; `buf` must stay valid until Complete covers fp.seq (the Work's
  // contract). Call before counting the collective as issued.
  void Post(int rank, const comm::Fingerprint& fp, void* buf);
  // Wakes the peers asleep on `rank`'s lane after Post. Call it before this
  // rank can next wait for anything, but not at once: its locked increment
  // waits for the publication's stores to leave this core (the peers' copies
  // of the node's line invalidated, ~100-300 ns here), which the issuing
  // rank's other work (its Work record, its clock read) can cover. Never
  // blocks.
  void WakePeers(int rank);

  // Completes rank `rank`'s lane collectives up to and including `seq`, in
  // issue order, waiting for the peers' contributions until `wait_deadline`
  // (kWaitTimeout) or `op_deadline` (the run aborts with a timeout). After
  // an abort a collective still missing a contribution fails at once; one
  // with all of them posted completes. Blocks; the rank's thread only.
  AwaitResult Complete(Group& group, int rank, int64_t seq,
                       Deadline wait_deadline, Deadline op_deadline,
                       absl::Time issued);

  // "rank 1 (it has issued 0 collectives), rank 2 (...)": the peers whose
  // contribution to `rank`'s next lane collective is missing. The rank's
  // thread only.
  std::string MissingRanks(const Group& group, int rank) const;

  // Whether `rank`'s lane collective `seq` has completed. Thread-safe.
  bool Completed(int rank, int64_t seq) const;

  // Wakes every rank sleeping on a lane (abort, exit). Never blocks.
  void WakeAll();
  // Wakes the ranks waiting for `rank`'s lane (it issued a collective on
  // the Slot path: one of them may be waiting for it). Never blocks.
  void Wake(int rank);

 private:
  struct Node;
  struct Lane;
  struct Consumer;

  // A node for `rank`'s lane collective after the one being posted: one
  // every peer has moved past, else a new one.
  Node* TakeNode(int rank);
  // Moves `rank`'s nodes every peer has moved past to its free list; with
  // `look`, reads the peers' progress first (else uses what it last read).
  void Reclaim(int rank, bool look);
  // Whether `rank` has no free node and enough in use to look at the peers
  // rather than take a new one.
  bool ShouldLook(int rank) const;
  // Waits until `expect` (the node `peer`'s next lane collective will use)
  // holds a collective numbered above `after`.
  AwaitResult AwaitNode(Group& group, int rank, int peer, const Node& expect,
                        int64_t after, const comm::Fingerprint& fp,
                        Deadline wait_deadline, Deadline op_deadline,
                        absl::Time issued);
  // The mismatch when `peer`'s next lane collective (`next`, or none
  // posted) is not `fp`; OK when `peer` simply has not issued it yet.
  absl::Status CheckPeer(Group& group, int rank, int peer,
                         const comm::Fingerprint* next,
                         const comm::Fingerprint& fp);

  const int world_size_;
  std::unique_ptr<Lane[]> lanes_;
  std::unique_ptr<Consumer[]> consumers_;
};

// The Work of a lane collective.
class FastWork : public comm::Work, public RecycledPerThread<FastWork> {
 public:
  // `released`: as SimWork's (SimCommunicator's overlap check).
  FastWork(Group& group, int rank, comm::WorkRecord record,
           Deadline op_deadline, std::shared_ptr<std::atomic<bool>> released);
  // Completes the operation if it has not (bounded by the operation
  // timeout): its peers' nodes are read, and its buffer written, only on
  // this rank's thread. During an exception's unwinding it aborts the run
  // first (the rank is going down; its peers must not wait for it).
  ~FastWork() override;

  bool IsCompleted() override;
  absl::Status Wait(absl::Duration timeout) override;

 private:
  // Acts on Complete's result; false while still in flight.
  bool Conclude(const AwaitResult& r);
  void Finish(absl::Status status);

  Group& group_;
  const int rank_;
  const Deadline op_deadline_;
  const std::shared_ptr<std::atomic<bool>> released_;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_FAST_LANE_H_
