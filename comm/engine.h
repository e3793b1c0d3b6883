// Engine: what a communication engine (sim, mpi, nccl, gloo) tells the
// launch registry (train/launch/registry.h) about itself, and the
// process-wide list where each engine registers itself next to its own code:
//
//   // comm/foo/foo_engine.cc, in a cc_library with alwayslink = True
//   comm::Engine FooEngine() {
//     comm::Engine e;
//     e.name = "foo";
//     ...
//     return e;
//   }
//   TANDEM_REGISTER_ENGINE(50, FooEngine);
//
// Registration happens during static initialisation, so an engine library
// must be linked whole (Bazel: alwayslink = True), or the linker drops the
// object that nobody references and the engine silently goes missing. The
// list's order is the registration's `order` argument, never the link or
// initialisation order: it is the order `--backend`'s help and choices
// print (sim 10, mpi 20, nccl 30, gloo 40).
//
// Thread-safety: RegisterEngine may run from static initialisers of any
// translation unit; RegisteredEngines from any thread after main starts.
#ifndef TANDEM_COMM_ENGINE_H_
#define TANDEM_COMM_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cuda_stream.h"
#include "comm/launch_env.h"
#include "comm/launcher.h"

namespace tandem::comm {

// What the registry knows about this process when it picks an engine.
struct LaunchContext {
  // The launcher's variables (torchrun, mpirun, srun); nullopt for a plain
  // start.
  std::optional<LaunchEnv> launch;
  int gpu_count = 0;
  std::string no_gpu_reason;  // why gpu_count is 0 (the CUDA probe's words)

  // The number of processes the launcher started (1 for a plain start).
  int launched_world_size() const {
    return launch.has_value() ? launch->world_size : 1;
  }
  // Started by torchrun or tandemrun (RANK/WORLD_SIZE/MASTER_ADDR/...).
  bool under_torchrun() const {
    return launch.has_value() && launch->launcher == "torchrun";
  }
  // Started by mpirun or srun: the processes are MPI ranks.
  bool under_mpi_launcher() const {
    return launch.has_value() && launch->launcher != "torchrun";
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
  // The stream a rank's device work is queued on when called on that
  // rank's thread with its CUDA device ordinal: GPU engines (nccl) order
  // the rank's collectives after it. comm knows no tensor: train's registry
  // (train::BuiltinEngines) sets it to tensor/cuda's CurrentStream. Empty:
  // collectives are not ordered after any compute stream.
  std::function<absl::StatusOr<CudaStreamHandle>(int device)> compute_stream;
};

struct Engine {
  std::string name;         // the --backend value
  std::string description;  // one line for --help
  // True when each process is one rank of a world a launcher started (mpi);
  // false when this process hosts the whole world (sim, nccl).
  bool joins_launched_world = false;
  // The launchers (LaunchEnv::launcher) whose worlds it joins: mpi
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
  std::function<std::unique_ptr<Launcher>(const RunOptions&)> make_launcher;
  // Called for each failed rank this process hosts, before Run returns;
  // optional (mpi: prints the error and ends the job).
  std::function<void(const RankStatus&)> on_rank_error;
};

// Adds the engine that `make` builds to the process-wide list, at position
// `order` (ascending; ties by name). Returns true, so that it can initialise
// a namespace-scope constant (TANDEM_REGISTER_ENGINE). `make` is called by
// every RegisteredEngines, never here, so registration does no work that
// could depend on another translation unit's initialisation.
bool RegisterEngine(int order, Engine (*make)());

// A fresh copy of every registered engine, in registration order (above).
// Duplicate names and missing functions are left for the launch registry
// to refuse (train::LaunchRegistry::Add).
std::vector<Engine> RegisteredEngines();

}  // namespace tandem::comm

// Registers `make` (a function returning comm::Engine) at `order`; use once,
// at namespace scope, in the engine's own .cc file.
#define TANDEM_REGISTER_ENGINE(order, make)                 \
  [[maybe_unused]] static const bool tandem_engine_##make = \
      ::tandem::comm::RegisterEngine(order, &make)

#endif  // TANDEM_COMM_ENGINE_H_
