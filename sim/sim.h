// The simulated cluster: N ranks as threads in one process, like
// torch.multiprocessing.spawn, each with a Communicator (backend "sim"), or
// as user-space fibers on one worker thread per core (Options::ranks =
// RankExecution::kFibers; see options.h for what a fiber rank may not do).
//
//   sim::RunResult result = sim::Run(4, [](int rank, comm::Communicator& comm)
//                                           -> absl::Status {
//     std::vector<float> grad(1024, float(rank));
//     auto work = comm.AllReduce(comm::HostView(absl::MakeSpan(grad)),
//                                comm::ReduceOp::kSum);
//     TANDEM_RETURN_IF_ERROR(work->Wait());   // grad[i] == 0 + 1 + 2 + 3
//     comm::RankPrinter(comm).PrintOnRank0("done");
//     return absl::OkStatus();
//   });
//   TANDEM_RETURN_IF_ERROR(result.status());
//
// The sim communicator is the reference implementation of the contract in
// comm/communicator.h:
//   * Data moves on the ranks' threads (no helper thread): an all-reduce is
//     split so that each rank reduces its slice reading every rank's buffer
//     directly and writes the result into every rank's buffer; no staging
//     copies. Waiting ranks take over work of ranks that are busy elsewhere.
//   * Deterministic: every element is combined in rank order, so results
//     are bitwise identical from run to run and equal to a serial loop.
//   * Checked: every operation's fingerprint (sequence number, op, dtype,
//     count, root, reduce op, peer) is compared across ranks; a mismatch
//     fails every rank with both fingerprints.
//   * Bounded: an operation not complete within Options::timeout fails and
//     names the ranks that never issued it; a rank whose function returns an
//     error or throws aborts every other rank's pending and future
//     operations at once; a rank that returns while others wait for it fails
//     those waits at once. Waiting ranks spin for at most Options::spin (only
//     when ranks <= usable CPUs; adapted per rank, sim/wait_policy.h) and
//     then block.
//   * Host memory only. World sizes 1 to kMaxWorldSize.
// See sim/options.h for faults and output capture.
#ifndef TANDEM_SIM_SIM_H_
#define TANDEM_SIM_SIM_H_

#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"
#include "sim/clock.h"
#include "sim/options.h"
#include "sim/output_capture.h"

namespace tandem::sim {

inline constexpr int kMaxWorldSize = 8192;

// What every rank runs. The Communicator is valid during the call only.
using RankFn = std::function<absl::Status(int rank, comm::Communicator& comm)>;

struct RunResult {
  // Why the run could not start (bad world size or options); OK if it ran.
  absl::Status launch;
  // What each rank's function returned, in rank order. An exception thrown
  // by a rank becomes kInternal naming the exception.
  std::vector<absl::Status> ranks;
  // Each rank's network clock when its function returned, in rank order;
  // empty when Options::clock is unset.
  std::vector<ClockReading> clocks;

  bool ok() const;
  // OK, the launch error, or the most telling rank error prefixed with its
  // rank: the first that is not kAborted (the cause), else the first.
  absl::Status status() const;
};

// Runs fn(rank, comm) for rank = 0 .. world_size - 1, each on its own thread
// (or fiber: Options::ranks), and returns when every rank's function has
// returned. Blocks the caller.
// Every Work a rank gets must be destroyed before its function returns (the
// destructor waits for it; a Work kept past that may outlive the buffers the
// other ranks' threads still move).
// Thread-safe: independent runs may proceed concurrently.
RunResult Run(int world_size, const RankFn& fn,
              const Options& options = Options());

// The network clock of `comm`'s rank, up to now (compute since its last
// operation included); nullopt when `comm` is not a sim communicator or its
// run has no clock. Call it only on the rank's own thread.
std::optional<ClockReading> ReadClock(comm::Communicator& comm);

// Charges `seconds` (>= 0) of compute to the clock of `comm`'s rank, on top
// of what is measured: for a modelled rather than measured compute phase.
// A no-op when there is no clock. Only on the rank's own thread.
void AdvanceClock(comm::Communicator& comm, double seconds);

}  // namespace tandem::sim

#endif  // TANDEM_SIM_SIM_H_
