// RankClock: one rank's network clock (the contract is in sim/clock.h).
// Internal to sim: the rank's SimCommunicator creates one per rank when the
// clock is on, and the communicators Split from it share it, so that one
// rank has one time whichever communicator it waits on.
//
// Each communicator is a stream of the clock (AddStream): its collectives
// queue one after another on it, as on NCCL's one stream per communicator,
// and cost what the stream's topology gives (a sub-group's SubTopology).
// Streams run side by side; contention between them is not modelled.
//
// Thread safety: used only by its rank's thread (the communicators' and
// their Works' calls), except that it reads shared Slots once they are ready
// (their issue times are fixed from then on).
#ifndef TANDEM_SIM_RANK_CLOCK_H_
#define TANDEM_SIM_RANK_CLOCK_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/fingerprint.h"
#include "sim/clock.h"
#include "sim/cost/topology.h"
#include "sim/group.h"

namespace tandem::sim::internal {

class RankClock {
 public:
  RankClock(const ClockOptions& options, int rank);

  // Entering the communicator: charges the thread CPU time since the last
  // Resume() as compute and returns the rank's simulated time.
  double Pause();
  // Leaving the communicator: compute is measured again from here.
  void Resume();
  // Charges `seconds` of compute (AdvanceClock).
  // Compute charged for `busy_s` seconds of thread CPU time of which
  // `math_s` were inside dense math kernels (ClockOptions' scales).
  static double ChargeFor(const ClockOptions& options, double busy_s,
                          double math_s);

  void Advance(double seconds);

  // The stream of the communicator of the whole run: its topology is
  // ClockOptions::topology, its ranks are the run's.
  static constexpr int kRunStream = 0;
  // A new stream for a sub-communicator whose member i is rank
  // `global_ranks[i]` of the run; its collectives cost what
  // cost::SubTopology gives for those ranks. Returns the stream's id.
  // InvalidArgument if a rank is outside the run.
  absl::StatusOr<int> AddStream(const std::vector<int>& global_ranks);

  // Collective `fp` (collective number fp.seq of `stream`'s communicator)
  // was posted in `slot`. A stream's collectives must be registered in
  // issue order.
  void OnCollectiveIssued(int stream, const comm::Fingerprint& fp,
                          std::shared_ptr<const Slot> slot);
  // The rank observed collective `seq` of `stream` (or a Send/Recv between
  // `src` and `dst`, ranks of that stream's communicator, with its ready
  // slot) complete: the clock moves to the operation's end.
  void OnCollectiveCompleted(int stream, int64_t seq);
  void OnPointToPointCompleted(int stream, const comm::Fingerprint& fp,
                               const Slot& slot, int src, int dst);

  ClockReading Read() const { return reading_; }

 private:
  struct Pending {
    int64_t seq = 0;
    std::shared_ptr<const Slot> slot;
    double duration_s = 0;
    double end_s = -1;  // once computed
  };
  struct Stream {
    cost::Topology topology;
    std::vector<int> global_ranks;  // empty: the run's ranks themselves
    double network_free_s = 0;      // end of the last settled collective
    std::deque<Pending> pending;
  };
  // Settles end times of `s`'s pending collectives up to `seq` (all ready).
  static void SettleThrough(Stream& s, int64_t seq);
  void ObserveEnd(double end_s, double duration_s);

  const ClockOptions options_;
  const int rank_;
  double cpu_mark_s_ = 0;
  double math_mark_s_ = 0;       // base::ThisThreadMathSeconds() at cpu_mark_s_
  std::vector<Stream> streams_;  // [kRunStream] is the run's communicator
  ClockReading reading_;
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_RANK_CLOCK_H_
