// One process per GPU, on one node or many: an NcclCommunicator bootstrapped
// over MPI (mpirun/srun start the processes; MPI carries NCCL's unique id).
//
//   // mpirun -np 8 --map-by ppr:4:node my_trainer   (2 nodes x 4 GPUs)
//   TANDEM_ASSIGN_OR_RETURN(auto mpi, comm::MpiCommunicator::Create());
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::NcclCommunicator> nccl,
//                           comm::CreateNcclCommunicatorFromMpi(*mpi));
//   // nccl->rank() == mpi->rank(); nccl->device().ordinal == local rank % GPUs
//   seen
//
// Protocol (every rank runs it; it is collective over `bootstrap`):
//   1. each rank checks that it can drive a GPU: CUDA sees at least one
//      device, and at least as many as there are ranks on its node (two
//      ranks on one GPU would fail inside NCCL);
//   2. an MPI all-reduce of one flag per rank tells every rank which ranks
//      cannot, so all of them fail together with the same message instead
//      of some waiting in NCCL's init for a rank that gave up;
//   3. rank 0 makes the ncclUniqueId and broadcasts it as u8 bytes (with a
//      status byte, so a failure on rank 0 reaches everyone too);
//   4. each rank joins on device local_rank % visible devices (the MPI
//      communicator's local rank: its rank among the processes of its node),
//      honouring CUDA_VISIBLE_DEVICES.
// Every wait is bounded: the MPI steps by the MPI communicator's timeout,
// NCCL's init by options.timeout.
//
// Thread-safety: call from the thread that owns `bootstrap`.
#ifndef TANDEM_COMM_NCCL_MPI_BOOTSTRAP_H_
#define TANDEM_COMM_NCCL_MPI_BOOTSTRAP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/nccl/nccl_communicator.h"

namespace tandem::comm {

// `bootstrap` is only used during the call; the NCCL communicator does not
// keep it. Fails (on every rank alike) with kFailedPrecondition when some
// rank has no usable GPU, naming those ranks.
absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateNcclCommunicatorFromMpi(
    MpiCommunicator& bootstrap, const NcclOptions& options = {});

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_MPI_BOOTSTRAP_H_
