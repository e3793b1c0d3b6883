// Launcher: how an engine starts a world of ranks.
//
// The conformance suite (comm/conformance/conformance.h) is written against
// this interface only, so every backend runs the same tests: sim starts N
// threads in-process; MPI runs under mpirun, each process one rank; NCCL one
// thread per GPU. A backend joins by implementing Launcher and instantiating
// the suite with it (TANDEM_INSTANTIATE_COMM_CONFORMANCE).
//
//   class SimLauncher : public comm::Launcher {
//    public:
//     std::string name() const override { return "sim"; }
//     absl::Status CanRun(int n) const override { ... }
//     std::vector<RankStatus> Run(int n, const RankFn& fn) override { ... }
//   };
#ifndef TANDEM_COMM_LAUNCHER_H_
#define TANDEM_COMM_LAUNCHER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/communicator.h"

namespace tandem::comm {

// What each rank runs; returns an error describing the first wrong result.
using RankFn = std::function<absl::Status(int rank, Communicator& comm)>;

struct RankStatus {
  int rank = 0;
  absl::Status status;
};

class Launcher {
 public:
  virtual ~Launcher() = default;

  // Short name for messages ("sim", "mpi", "nccl").
  virtual std::string name() const = 0;

  // OK when Run() can start `world_size` ranks here and now (sim: 1 to
  // sim::kMaxWorldSize; MPI: exactly the size mpirun started; NCCL: at most
  // the visible GPUs). Otherwise an error whose message says why and what to
  // run instead (the conformance suite skips such sizes). Never blocks for
  // long and starts nothing.
  virtual absl::Status CanRun(int world_size) const = 0;

  // Runs fn(rank, comm) on every rank of a fresh world of `world_size` ranks
  // and returns the status of each rank this process hosts (sim: all of
  // them; MPI: its own). Blocks until those ranks return. Must not hang: the
  // backend's own timeouts bound every wait.
  virtual std::vector<RankStatus> Run(int world_size, const RankFn& fn) = 0;
};

// The one error that explains a run: OK when every status is; otherwise the
// first that is not kAborted (the cause; the others were aborted because of
// it), else the first, its message prefixed with "rank <r>: ".
absl::Status MostTellingStatus(const std::vector<RankStatus>& statuses);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_LAUNCHER_H_
