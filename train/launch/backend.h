// Choosing and starting a communication backend for the example binaries
// (toy_ddp, digits_ddp): the one place where train/ picks a backend.
//
//   absl::StatusOr<ResolvedBackend> backend =
//       ResolveBackend({.backend = "auto", .world_size = 0});
//   if (!backend.ok()) { /* a usage error: print it, exit 2 */ }
//   absl::Status status = RunOnBackend(*backend,
//       [](comm::Communicator& comm) { return Train(comm); });
//
// Backends:
//   sim   N ranks as threads of this process (sim::Run).
//   mpi   this process is one rank of a job started by mpirun or srun
//         (comm/mpi); the world size is the job's.
//   nccl  one thread per local GPU (comm/nccl); needs a CUDA device. Rank r
//         drives CUDA device r; its thread has that device current and its
//         communicator ordered after the thread's tensor stream (below).
//         Rank functions place their model and batches with DeviceFor(comm).
//   auto  mpi when this process was started by mpirun/srun with more than
//         one rank, nccl when a CUDA device is present, else sim.
// World size 0 means: the job's size (mpi), the number of GPUs (nccl), or,
// for sim, the number of GPUs if there are any, else 2.
#ifndef TANDEM_TRAIN_LAUNCH_BACKEND_H_
#define TANDEM_TRAIN_LAUNCH_BACKEND_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"

namespace tandem::train {

struct BackendChoice {
  std::string backend = "auto";  // sim | mpi | nccl | auto
  int world_size = 0;            // 0: the backend's default (above)
};

struct ResolvedBackend {
  std::string backend;  // sim | mpi | nccl
  int world_size = 1;   // for mpi: the size the launcher announced
};

// Validates the choice against the machine and the launcher's environment.
// InvalidArgument for an unknown backend or a world size the backend cannot
// run; FailedPrecondition when the backend cannot run here (nccl without a
// GPU, mpi without mpirun), saying what to run instead.
absl::StatusOr<ResolvedBackend> ResolveBackend(const BackendChoice& choice);

// Runs `fn` for every rank this process hosts (all of them for sim and
// nccl, one for mpi) and blocks until they return. Returns OK or the most
// telling rank's error, prefixed with its rank. For binaries only: on mpi, a
// rank whose `fn` fails prints its error to stderr and ends the whole job
// with MPI_Abort, as mpirun users expect (the other processes would
// otherwise wait for it until their timeout).
//
// On nccl, before calling `fn` on a rank's thread, it makes the
// communicator's collectives wait (on the GPU, with an event) for the work
// that thread queues on its current tensor stream (tensor/cuda/cuda.h
// CurrentStream): what DistributedDataParallel needs to reduce gradients
// that backward just computed, without a host synchronisation.
absl::Status RunOnBackend(
    const ResolvedBackend& backend,
    const std::function<absl::Status(comm::Communicator&)>& fn);

// Where a rank of `comm` keeps its model and data: CUDA:<the communicator's
// device> for nccl, the CPU for every other backend.
//
//   const Device device = train::DeviceFor(comm);
//   TANDEM_RETURN_IF_ERROR(model->To(device));  // before wrapping in DDP
Device DeviceFor(const comm::Communicator& comm);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_BACKEND_H_
