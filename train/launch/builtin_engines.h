// The built-in engines of the launch registry (train/launch/registry.h):
//   sim   sim::SimLauncher, auto's last choice;
//   mpi   comm::MpiLauncher, auto's choice under mpirun/srun with >1 rank;
//   nccl  comm::NcclLocalLauncher (direct device buffers, each rank's
//         collectives ordered after its thread's tensor stream), auto's
//         choice when a CUDA device is visible.
//
//   absl::StatusOr<LaunchContext> here = DetectLaunchContext();
//   absl::StatusOr<ResolvedBackend> b = BuiltinEngines().Resolve(choice,
//   *here);
#ifndef TANDEM_TRAIN_LAUNCH_BUILTIN_ENGINES_H_
#define TANDEM_TRAIN_LAUNCH_BUILTIN_ENGINES_H_

#include "absl/status/statusor.h"
#include "train/launch/registry.h"

namespace tandem::train {

// A fresh registry of sim, mpi and nccl (in that order).
LaunchRegistry BuiltinEngines();

// Reads the environment (comm::DetectLaunchEnv) and probes CUDA. Fails only
// on malformed launcher variables, naming them.
absl::StatusOr<LaunchContext> DetectLaunchContext();

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_BUILTIN_ENGINES_H_
