// Starting ranks from a binary in two calls, through the launch registry of
// the built-in engines (train/launch/registry.h, which says what each backend
// does and how `auto` picks one).
//
//   absl::StatusOr<ResolvedBackend> backend =
//       ResolveBackend({.backend = "auto", .world_size = 0});
//   if (!backend.ok()) { /* a usage error: print it, exit 2 */ }
//   absl::Status status = RunOnBackend(*backend,
//       [](comm::Communicator& comm) { return Train(comm); });
#ifndef TANDEM_TRAIN_LAUNCH_BACKEND_H_
#define TANDEM_TRAIN_LAUNCH_BACKEND_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/launch/builtin_engines.h"
#include "train/launch/registry.h"

namespace tandem::train {

// BuiltinEngines().Resolve(choice, DetectLaunchContext()).
absl::StatusOr<ResolvedBackend> ResolveBackend(const BackendChoice& choice);

// torch.distributed.launch appends --local_rank=N to the program's
// arguments: `local_rank` is that flag's value (-1: not given). OK when not
// given, or when it agrees with LOCAL_RANK (or LOCAL_RANK is unset);
// InvalidArgument naming both when they differ or N is negative.
absl::Status CheckLocalRankFlag(int local_rank);

// BuiltinEngines().Run(backend, options, fn), with each rank's thread
// labelled with its rank for the timeline (trace::ScopedThreadRank). For
// binaries only: on mpi, a rank whose `fn` fails prints its error to stderr
// and ends the whole job with MPI_Abort.
absl::Status RunOnBackend(
    const ResolvedBackend& backend,
    const std::function<absl::Status(comm::Communicator&)>& fn,
    const RunOptions& options = {});

// Where a rank of `comm` keeps its model and data, from comm.device():
// CUDA:<ordinal> for a communicator on a GPU (nccl), else the CPU.
//
//   const Device device = train::DeviceFor(comm);
//   TANDEM_RETURN_IF_ERROR(model->To(device));  // before wrapping in DDP
Device DeviceFor(const comm::Communicator& comm);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_BACKEND_H_
