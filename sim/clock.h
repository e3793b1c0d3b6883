// The network clock of the simulated cluster: what it is told (ClockOptions)
// and what it reports (ClockReading). Off unless sim::Options::clock is set.
//
// Each rank keeps a simulated time, in seconds from the start of the run:
//   * compute: the host CPU time the rank's own thread spends outside the
//     communicator (thread CPU time, so ranks sharing a core do not charge
//     each other's time), times ClockOptions::compute_scale (or, with
//     ClockOptions::memory_scale, its math-kernel part times compute_scale
//     and the rest times memory_scale), plus anything charged by
//     sim::AdvanceClock;
//   * communication: every collective starts on the simulated network when
//     the last rank has issued it and the previous collective has finished
//     (one stream per communicator, as NCCL's), and takes the time the cost
//     model (sim/cost) gives its size on ClockOptions::topology. A rank's
//     clock waits for an operation only when it observes it complete (Wait,
//     or IsCompleted returning true): communication issued earlier runs
//     under the compute that follows, so DDP's overlap of bucket all-reduces
//     with backward is what the clock measures.
//   * Send/Recv start when both sides have issued them and take one hop of
//     PointToPointSeconds; they do not queue behind collectives.
//   * A communicator made by Split charges the same clock on a stream of its
//     own, costed on cost::SubTopology of its members' GPUs.
// The time a rank spends waiting past its own clock is its exposed
// communication.
//
//   sim::Options options;
//   options.clock = sim::ClockOptions{*cost::MakeTopology("h100-nvlink")};
//   sim::RunResult r = sim::Run(8, fn, options);
//   // r.clocks[rank].now_s, .compute_s, .exposed_comm_s
#ifndef TANDEM_SIM_CLOCK_H_
#define TANDEM_SIM_CLOCK_H_

#include <cstdint>

#include "sim/cost/collective_cost.h"
#include "sim/cost/topology.h"

namespace tandem::sim {

struct ClockOptions {
  // The simulated machine; its world_size() must equal the run's.
  cost::Topology topology;
  cost::Algorithm algorithm = cost::Algorithm::kAuto;
  // Simulated compute seconds per second of host thread CPU time: 1 charges
  // the host's own speed; a device profile's ratio (host / device speed)
  // predicts a faster device; 0 charges no measured compute at all (only
  // AdvanceClock), which makes the clock deterministic.
  double compute_scale = 1;
  // A device profile with a memory term: when >= 0, compute_scale applies
  // only to the CPU time spent inside dense math kernels (matrix products
  // and convolutions, base/math_tally.h: FLOP-bound, scaled by the ratio of
  // FLOP/s), and memory_scale to the rest of the rank's compute
  // (elementwise ops, the optimizer, bucket copies: bandwidth-bound, scaled
  // by the ratio of memory bandwidths). Negative (the default): compute_scale
  // for all of it.
  double memory_scale = -1;
};

// One rank's clock. Every field is in simulated seconds.
struct ClockReading {
  double now_s = 0;           // the rank's simulated time
  double compute_s = 0;       // charged compute (measured x scale + advanced)
  double exposed_comm_s = 0;  // time waited for communication past compute
  double comm_s = 0;          // modelled time of the operations observed
  int64_t operations = 0;     // operations observed complete
};

}  // namespace tandem::sim

#endif  // TANDEM_SIM_CLOCK_H_
