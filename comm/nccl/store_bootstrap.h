// One process per GPU without MPI: an NcclCommunicator bootstrapped through
// the TCP store (comm/store/tcp_store.h), as torchrun + init_process_group(
// "nccl") do through c10d's TCPStore.
//
//   // tandemrun --nproc_per_node=8 -- my_trainer --backend=nccl
//   TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<comm::NcclCommunicator> nccl,
//       comm::CreateNcclCommunicatorFromStore(client, {.rank = r,
//           .size = n, .local_rank = lr, .local_size = ln}));
//   // nccl->device().ordinal == local_rank % visible GPUs
//
// Protocol (every rank runs it; keys under `prefix`):
//   1. each rank checks that it can drive a GPU (CUDA sees a device, and at
//      least as many as the ranks on its node) and sets "<prefix>/gpu/<r>"
//      to "" or its problem; every rank waits for all of them (bounded by
//      the client's timeout, naming the ranks that never arrived), so all
//      fail together, naming the ranks that cannot;
//   2. rank 0 makes the ncclUniqueId and sets "<prefix>/id" to a status byte
//      and the id (or its error), which the others get;
//   3. each rank joins on device local_rank % visible devices.
// Thread-safety: as the client.
#ifndef TANDEM_COMM_NCCL_STORE_BOOTSTRAP_H_
#define TANDEM_COMM_NCCL_STORE_BOOTSTRAP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/store/tcp_store.h"

namespace tandem::comm {

struct NcclStoreBootstrap {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;  // ranks on this node (LOCAL_WORLD_SIZE)
  std::string prefix = "nccl";
};

// kFailedPrecondition on every rank alike when some rank has no usable GPU
// (naming them and this rank's reason); the store's errors otherwise.
absl::StatusOr<std::unique_ptr<NcclCommunicator>>
CreateNcclCommunicatorFromStore(TcpStoreClient& store,
                                const NcclStoreBootstrap& world,
                                const NcclOptions& options = {});

}  // namespace tandem::comm

#endif  // TANDEM_COMM_NCCL_STORE_BOOTSTRAP_H_
