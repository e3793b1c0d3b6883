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
// launcher's world).
//
// No global state: BuiltinEngines() (train/launch/builtin_engines.h) builds a
// fresh registry; tests build their own with fake engines and a fake
// LaunchContext.
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
#include "comm/launch_env.h"
#include "comm/launcher.h"

namespace tandem::train {

// What the registry knows about this process when it picks an engine.
struct LaunchContext {
  // The launcher's variables (torchrun, mpirun, srun); nullopt for a plain
  // start.
  std::optional<comm::LaunchEnv> launch;
  int gpu_count = 0;
  std::string no_gpu_reason;  // why gpu_count is 0 (the CUDA probe's words)

  // The number of processes the launcher started (1 for a plain start).
  int launched_world_size() const {
    return launch.has_value() ? launch->world_size : 1;
  }
};

// How an engine runs one job.
struct RunOptions {
  // Every operation must complete within `timeout` (positive, finite or
  // infinite), as torch's init_process_group(timeout=).
  absl::Duration timeout = absl::Seconds(300);
  // How often rank 0, blocked on its peers, writes "still waiting for ..."
  // to stderr (sim and mpi; zero turns the note off).
  absl::Duration stall_note_interval = absl::Seconds(30);
  // How long a waiting rank spins before it blocks (sim only: its
  // sim::Options::spin); nullopt keeps the engine's default.
  std::optional<absl::Duration> spin;
  // sim only: every rank a user-space fiber instead of an OS thread
  // (sim::Options::ranks = kFibers, docs/sim_scale.md).
  bool sim_fibers = false;
  // sim only: each rank's stack, bytes (sim::Options::stack_bytes); 0 keeps
  // the engine's default.
  int64_t sim_stack_bytes = 0;
};

// What each rank runs.
using RankMain = std::function<absl::Status(comm::Communicator& comm)>;

struct Engine {
  std::string name;         // the --backend value
  std::string description;  // one line for --help
  // True when each process is one rank of a world a launcher started (mpi);
  // false when this process hosts the whole world (sim, nccl).
  bool joins_launched_world = false;
  // The launchers (comm::LaunchEnv::launcher) whose worlds it joins: mpi
  // joins "OpenMPI" and "Slurm", gloo "torchrun"; the advice after a
  // private-world error names the engines that join the detected launcher.
  // An engine that hosts its world in this process (joins_launched_world
  // false) but lists a launcher runs one rank per process under it instead
  // (nccl under torchrun: one process per GPU).
  std::vector<std::string> launchers;
  // Whether `auto` picks this engine here; auto takes the first engine, in
  // ascending `auto_order`, for which this says yes.
  std::function<bool(const LaunchContext&)> auto_picks;
  int auto_order = 0;
  // The world size when none is asked for.
  std::function<int(const LaunchContext&)> default_world_size;
  // OK when `world_size` ranks can run here now; otherwise an error that
  // says why and what to run instead.
  std::function<absl::Status(int world_size, const LaunchContext&)> available;
  // A launcher for one job.
  std::function<std::unique_ptr<comm::Launcher>(const RunOptions&)>
      make_launcher;
  // Called for each failed rank this process hosts, before Run returns;
  // optional (mpi: prints the error and ends the job).
  std::function<void(const comm::RankStatus&)> on_rank_error;
};

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
