// The launch registry: the one list of engines a binary can start its ranks
// on, and the rules for picking one.
//
//   const train::LaunchRegistry registry = train::BuiltinEngines();  // below
//   absl::StatusOr<train::LaunchContext> here = train::DetectLaunchContext();
//   absl::StatusOr<train::ResolvedBackend> backend =
//       registry.Resolve({.backend = "auto", .world_size = 0}, *here);
//   if (!backend.ok()) { /* a usage error: print it, exit 2 */ }
//   absl::Status status = registry.Run(*backend, {.timeout = absl::Minutes(5)},
//       [](comm::Communicator& comm) { return Train(comm); });
//
// Each engine (Engine below) registers its name, a one-line description (the
// `--backend` help is generated from them), whether it can run N ranks here
// and now (the reason when not), and how it starts N ranks (a comm::Launcher
// built from RunOptions). The built-in engines:
//   sim   N ranks as threads of this process (sim::SimLauncher).
//   mpi   this process is one rank of a job started by mpirun or srun
//         (comm::MpiLauncher); the world size is the job's. A rank that fails
//         prints its error and ends the whole job (MPI_Abort).
//   nccl  under tandemrun/torchrun: one process per GPU, rank on
//         cuda:LOCAL_RANK, bootstrapped through the TCP store
//         (comm::NcclStoreLauncher). Otherwise
//         one thread per local GPU (comm::NcclLocalLauncher, direct mode):
//         rank r drives CUDA device r with that device current, and its
//         collectives are ordered after the thread's tensor stream
//         (tensor/cuda/cuda.h CurrentStream), so DDP can reduce gradients that
//         backward just queued without a host synchronisation.
//   gloo  this process is one rank of a job started by tandemrun or
//         torchrun (comm::GlooLauncher): the ranks meet at the TCP store at
//         MASTER_ADDR:MASTER_PORT.
//   auto  mpi under mpirun/srun and gloo under tandemrun/torchrun with more
//         than one rank, nccl when a CUDA device is present, else sim.
// World size 0 means the engine's default: the job's size (mpi), the number
// of GPUs (nccl), or, for sim, the number of GPUs if there are any, else 2.
//
// A launch environment is never ignored: an engine that hosts the whole world
// in this process (sim, nccl) inside a launched world of more than one
// process (mpirun/srun, or torchrun's RANK/WORLD_SIZE) is an error saying
// what was detected and what to run instead (the engines that join that
// launcher's world). A launched world of one process is a world of one rank
// whatever the engine (its default size is not used; another --world_size is
// an error).
//
// A LaunchRegistry is a plain value: BuiltinEngines()
// (train/launch/builtin_engines.h) builds a fresh one from the engines that
// registered themselves (comm/engine.h); tests build their own with fake
// engines and a fake LaunchContext.
#ifndef TANDEM_TRAIN_LAUNCH_REGISTRY_H_
#define TANDEM_TRAIN_LAUNCH_REGISTRY_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "comm/engine.h"
#include "comm/launch_env.h"
#include "comm/launcher.h"

namespace tandem::train {

// The engine description and its inputs live in comm (comm/engine.h), so
// that each engine registers itself next to its own code; train names them
// here as before.
using LaunchContext = comm::LaunchContext;
using RunOptions = comm::RunOptions;
using Engine = comm::Engine;

// What each rank runs.
using RankMain = std::function<absl::Status(comm::Communicator& comm)>;

struct BackendChoice {
  std::string backend = "auto";  // an engine's name or "auto"
  int world_size = 0;            // 0: the engine's default (above)
};

struct ResolvedBackend {
  std::string backend;  // an engine's name, never "auto"
  int world_size = 1;   // for mpi: the size the launcher announced
};

class LaunchRegistry {
 public:
  // InvalidArgument for an empty or duplicate name, "auto", or a missing
  // function.
  absl::Status Add(Engine engine);

  // nullptr when no engine has that name.
  const Engine* Find(std::string_view name) const;
  const std::vector<Engine>& engines() const { return engines_; }

  // "sim, mpi, nccl or auto".
  std::string Choices() const;
  // The --backend flag's help: every engine's description, then auto's rule.
  std::string BackendHelp() const;

  // Picks the engine and world size for `choice` here. InvalidArgument for
  // an unknown backend or a world size it cannot run; FailedPrecondition when
  // it cannot run here (nccl without a GPU, sim inside an MPI job...), saying
  // what was detected and what to run instead. An engine's own refusal is
  // prefixed with "--backend=<engine>[ --world_size=<n>]: ".
  absl::StatusOr<ResolvedBackend> Resolve(const BackendChoice& choice,
                                          const LaunchContext& here) const;

  // Runs `fn` on every rank this process hosts (all of them for sim and
  // nccl, one for mpi) and blocks until they return. OK, or the most telling
  // rank error prefixed with its rank (comm::MostTellingStatus).
  absl::Status Run(const ResolvedBackend& backend, const RunOptions& options,
                   const RankMain& fn) const;

 private:
  std::vector<Engine> engines_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_REGISTRY_H_
