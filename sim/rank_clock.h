// RankClock: one rank's network clock (the contract is in sim/clock.h).
// Internal to sim: SimCommunicator owns one per rank when the clock is on.
//
// Thread safety: used only by its rank's thread (the communicator's and its
// Works' calls), except that it reads shared Slots once they are ready
// (their issue times are fixed from then on).
#ifndef TANDEM_SIM_RANK_CLOCK_H_
#define TANDEM_SIM_RANK_CLOCK_H_

#include <cstdint>
#include <deque>
#include <memory>

#include "comm/fingerprint.h"
#include "sim/clock.h"
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

  // Collective `fp` (this rank's collective number fp.seq) was posted in
  // `slot`. Collectives must be registered in issue order.
  void OnCollectiveIssued(const comm::Fingerprint& fp,
                          std::shared_ptr<const Slot> slot);
  // The rank observed collective `seq` (or a Send/Recv, `p2p` with its
  // ready slot) complete: the clock moves to the operation's end.
  void OnCollectiveCompleted(int64_t seq);
  void OnPointToPointCompleted(const comm::Fingerprint& fp, const Slot& slot,
                               int src, int dst);

  ClockReading Read() const { return reading_; }

 private:
  struct Pending {
    int64_t seq = 0;
    std::shared_ptr<const Slot> slot;
    double duration_s = 0;
    double end_s = -1;  // once computed
  };
  // Settles end times of pending collectives up to `seq` (all ready).
  void SettleThrough(int64_t seq);
  void ObserveEnd(double end_s, double duration_s);

  const ClockOptions options_;
  const int rank_;
  double cpu_mark_s_ = 0;
  double math_mark_s_ = 0;     // base::ThisThreadMathSeconds() at cpu_mark_s_
  double network_free_s_ = 0;  // end of the last settled collective
  std::deque<Pending> pending_;
  ClockReading reading_;
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_RANK_CLOCK_H_
