// Which rank this process is, as its launcher tells it through the
// environment: torchrun, mpirun (OpenMPI) or Slurm's srun.
//
//   absl::StatusOr<std::optional<LaunchEnv>> env = DetectLaunchEnv();
//   if (env.ok() && env->has_value()) {
//     // e.g. {rank 3, local_rank 1, world_size 8, launcher "OpenMPI"}
//   }
//
// Checked in this order, first complete set (a rank and a world size) wins:
//   torchrun:  RANK, WORLD_SIZE (LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
//              and MASTER_PORT optional: a process started by hand, as
//              PyTorch documents for env:// without torchrun, sets RANK,
//              WORLD_SIZE, MASTER_ADDR and MASTER_PORT only)
//   OpenMPI:   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE
//              (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//              optional)
//   Slurm:     SLURM_PROCID, SLURM_NTASKS (SLURM_LOCALID optional)
// A missing local rank is the rank (all processes on one node).
// A launcher whose variables are present but malformed (not an integer, rank
// outside [0, world_size)) is an error naming the variable and its value, and
// so is an incomplete set: any of a launcher's variables present (above, or
// TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT,
// TORCHELASTIC_MAX_RESTARTS) without its rank and world size means the
// process was launched but cannot know its place, and running a private
// world instead would train the wrong job with exit 0. Slurm's
// allocation-wide variables (SLURM_JOB_ID, SLURM_NTASKS alone) are set in an
// allocation's shell outside any job step and do not count.
// No launcher variable at all is std::nullopt: a plain single-process start.
// Pure apart from reading the environment; thread-safe.
#ifndef TANDEM_COMM_LAUNCH_ENV_H_
#define TANDEM_COMM_LAUNCH_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::comm {

struct LaunchEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = -1;  // -1 when the launcher does not say
  std::string launcher;       // "torchrun", "OpenMPI" or "Slurm"
  // torchrun only: where the rendezvous store listens (MASTER_ADDR,
  // MASTER_PORT); empty and 0 when not set.
  std::string master_addr = {};
  int master_port = 0;
};

// Returns the value of an environment variable, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Reads the process environment (getenv).
absl::StatusOr<std::optional<LaunchEnv>> DetectLaunchEnv();
// Same, through `lookup` (for tests).
absl::StatusOr<std::optional<LaunchEnv>> DetectLaunchEnv(
    const EnvLookup& lookup);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_LAUNCH_ENV_H_
