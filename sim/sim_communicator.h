// SimCommunicator: one rank's Communicator in the simulated cluster, and
// SimWork, its Work. Internal to sim; sim::Run creates one per rank.
//
// Contract beyond comm::Communicator:
//   * Host memory only (a CUDA BufferView is an argument error).
//   * Data moves on the ranks' own threads: a Work makes progress while some
//     participant Waits on it (or polls IsCompleted(), one chunk per call).
//     Any participant can finish the whole operation, so an operation
//     completes as soon as every participant has issued it and one of them
//     waits; Works may be waited in any order.
//   * Outstanding operations of one rank must not share buffers where one of
//     them writes (concurrent reads are fine, e.g. the same buffer sent to two
//     peers). A violation is an argument error naming both operations, not
//     silent corruption. An operation is outstanding from its issue until
//     this rank has seen its Work complete (Wait returned, IsCompleted
//     returned true) or destroyed it, so the check depends only on the rank's
//     own program order, never on timing.
//   * Destroying a Work that has not completed waits for it (bounded by the
//     operation timeout), except while an exception unwinds: then the run
//     aborts at once, as a crashing rank would.
#ifndef TANDEM_SIM_SIM_COMMUNICATOR_H_
#define TANDEM_SIM_SIM_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "comm/communicator.h"
#include "comm/fingerprint.h"
#include "comm/front.h"
#include "comm/line_sink.h"
#include "comm/types.h"
#include "comm/work.h"
#include "sim/block_cache.h"
#include "sim/group.h"
#include "sim/rank_clock.h"

namespace tandem::sim::internal {

class SimWork : public comm::Work, public RecycledPerThread<SimWork> {
 public:
  // `home`: the task group this participant runs first (its rank for
  // collectives, 0 for Send/Recv).
  // `released` is set once this rank has seen the Work complete or dropped
  // it (SimCommunicator's overlap check reads it).
  // `clock`: the rank's network clock, or null when it is off; it outlives
  // this Work. `stream`: the issuing communicator's stream of that clock.
  // `src`/`dst`: the pair of a Send/Recv (unused otherwise).
  SimWork(Group& group, std::shared_ptr<Slot> slot, int home, int rank,
          comm::WorkRecord record, Deadline op_deadline,
          std::shared_ptr<std::atomic<bool>> released,
          RankClock* clock = nullptr, int stream = 0, int src = 0, int dst = 0);
  ~SimWork() override;

  bool IsCompleted() override;
  absl::Status Wait(absl::Duration timeout) override;

 private:
  // IsCompleted's check (one step of progress); true when complete.
  bool Poll();
  // Records `reason` (prefixed with this rank and op) as the final status,
  // once no task touches this rank's buffers any more.
  absl::Status Fail(const absl::Status& reason);
  // Records the final status.
  void Finish(absl::Status status);
  // Success: moves the network clock to the operation's simulated end.
  void FinishOk();

  Group& group_;
  const std::shared_ptr<Slot> slot_;
  const int home_;
  const int rank_;
  const Deadline op_deadline_;
  const std::shared_ptr<std::atomic<bool>> released_;
  RankClock* const clock_;
  const int stream_;
  const int src_;
  const int dst_;
  bool finished_ = false;
  absl::Status status_;
};

class SimCommunicator final : public comm::EngineFront {
 public:
  // `group` and `sink` outlive this. The network clock is on when
  // group.options().clock is set.
  SimCommunicator(Group& group, int rank, comm::LineSink& sink);
  ~SimCommunicator() override;

  // The rank's network clock, or null when it is off; communicators Split
  // from this one share it. Only this rank's thread may use it.
  RankClock* clock() { return clock_.get(); }

  int rank() const override { return rank_; }
  int size() const override { return group_.world_size(); }
  std::string_view backend() const override { return "sim"; }
  // Every rank's buffer is in reach of the slot's tasks, so they sum in the
  // canonical tree order as cheaply as in rank order (comm::ReduceInto).
  bool native_tree_sum() const override { return true; }

  // The reference Split: an AllGather of (color, key) over this
  // communicator (fingerprinted and bounded like any collective), then one
  // sim Group per color, shared by its members (Group::SubGroup). A color
  // below kNoColor fails Split on every rank, naming the rank. The child
  // charges the rank's one network clock, on a stream of its own costed
  // for its members' GPUs (RankClock::AddStream).
  absl::StatusOr<std::unique_ptr<comm::Communicator>> Split(int color,
                                                            int key) override;

  comm::LineSink& output() const override { return sink_; }

 protected:
  // Issues a checked operation (comm/front.h) on this rank's group: the
  // overlap check against operations still in flight, injected faults, the
  // slot, the network clock, the Work (recycled per thread).
  std::unique_ptr<comm::Work> Post(const Operation& op) override;

 private:
  // Byte ranges an operation reads and writes, for the overlap check.
  struct Range {
    uintptr_t begin = 0;
    uintptr_t end = 0;
  };
  // What one operation reads and writes of this rank's memory: at most one
  // buffer each (an empty range where it has none; empty ranges overlap
  // nothing). Plain values: no allocation per operation.
  struct Access {
    Range read;
    Range write;
  };
  struct InFlight {
    std::shared_ptr<const std::atomic<bool>> released;
    comm::Fingerprint fp;
    Access access;
  };

  // A communicator made by Split: keeps `subgroup` alive and, when
  // destroyed, marks its rank exited there (so peers still waiting on it
  // fail at once). Member i of the child is rank `global_ranks[i]` of the
  // run; `clock` (null when off) is the parent's, `stream` the child's own.
  SimCommunicator(std::shared_ptr<Group> subgroup, int rank,
                  comm::LineSink& sink, std::vector<int> global_ranks,
                  std::shared_ptr<RankClock> clock, int stream);

  static Range RangeOf(const comm::BufferView& buf);
  std::unique_ptr<comm::Work> IssueCollective(comm::Fingerprint fp,
                                              Endpoint endpoint, Access access);
  std::unique_ptr<comm::Work> IssuePointToPoint(int peer, comm::Fingerprint fp,
                                                Endpoint endpoint,
                                                Access access);
  absl::Status CheckNoConflict(const comm::Fingerprint& fp,
                               const Access& access);
  // Records an issued operation for the overlap check; returns the flag its
  // Work sets once released (recycled per thread, sim/block_cache.h).
  std::shared_ptr<std::atomic<bool>> TrackInFlight(const comm::Fingerprint& fp,
                                                   Access access);
  absl::Status Annotate(const comm::Fingerprint& fp,
                        const absl::Status& reason) const;

  const std::shared_ptr<Group> subgroup_;  // Split's result only
  Group& group_;
  const int rank_;
  comm::LineSink& sink_;
  int64_t next_collective_ = 0;
  // Messages issued to / from each peer this rank has talked to. Maps, not
  // world-size vectors: a rank talks to few peers, and two vectors per rank
  // would be world_size^2 counters (1 GiB at 8192 ranks).
  absl::flat_hash_map<int, int64_t> sends_to_;
  absl::flat_hash_map<int, int64_t> recvs_from_;
  std::vector<InFlight> in_flight_;
  // Rank i of this communicator is rank global_ranks_[i] of the run
  // (empty: the run's communicator itself).
  const std::vector<int> global_ranks_;
  std::shared_ptr<RankClock> clock_;
  int clock_stream_ = RankClock::kRunStream;
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_SIM_COMMUNICATOR_H_
