// The built-in engines of the launch registry (train/launch/registry.h):
// every engine that registered itself in comm/engine.h's list (each in its
// own folder: sim/sim_engine.cc, comm/mpi/mpi_engine.cc,
// comm/nccl/nccl_engine.cc, comm/gloo/gloo_engine.cc), linked in through
// this library's deps:
//   sim   sim::SimLauncher, auto's last choice;
//   mpi   comm::MpiLauncher, auto's choice under mpirun/srun with >1 rank;
//   nccl  comm::NcclLocalLauncher (direct device buffers, each rank's
//         collectives ordered after its thread's tensor stream), auto's
//         choice when a CUDA device is visible;
//   gloo  comm::GlooLauncher, auto's choice under tandemrun/torchrun with
//         >1 rank and no GPU.
//
//   absl::StatusOr<LaunchContext> here = DetectLaunchContext();
//   absl::StatusOr<ResolvedBackend> b = BuiltinEngines().Resolve(choice,
//   *here);
#ifndef TANDEM_TRAIN_LAUNCH_BUILTIN_ENGINES_H_
#define TANDEM_TRAIN_LAUNCH_BUILTIN_ENGINES_H_

#include "absl/status/statusor.h"
#include "train/launch/registry.h"

namespace tandem::train {

// A fresh registry of the registered engines, in their registration order
// (sim, mpi, nccl, gloo). Each engine's launcher gets
// RunOptions::compute_stream = tensor/cuda's CurrentStream unless the
// caller set one.
LaunchRegistry BuiltinEngines();

// `engine` whose launchers get RunOptions::compute_stream = tensor/cuda's
// CurrentStream (the calling rank thread's stream on its device) unless the
// caller set one. comm knows no tensor, so train supplies the stream a GPU
// engine (nccl) orders each rank's collectives after. BuiltinEngines applies
// it to every engine.
Engine WithTensorComputeStream(Engine engine);

// Reads the environment (comm::DetectLaunchEnv) and probes CUDA. Fails only
// on malformed launcher variables, naming them.
absl::StatusOr<LaunchContext> DetectLaunchContext();

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_BUILTIN_ENGINES_H_
