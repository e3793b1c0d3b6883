#include "comm/nccl/store_bootstrap.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/nccl/cuda_probe.h"

namespace tandem::comm {
namespace {

// Why this rank cannot drive a GPU ("" if it can).
std::string LocalProblem(int local_size) {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  if (!probe.ok()) return std::string(probe.status().message());
  if (probe->device_count == 0) return probe->no_device_reason;
  if (local_size > probe->device_count) {
    return absl::StrCat(local_size, " ranks share this node but it has ",
                        probe->device_count,
                        " visible GPU(s); start at most one rank per GPU");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>>
CreateNcclCommunicatorFromStore(TcpStoreClient& store,
                                const NcclStoreBootstrap& world,
                                const NcclOptions& options) {
  const std::string where =
      absl::StrCat("CreateNcclCommunicatorFromStore on rank ", world.rank,
                   " of ", world.size, ": ");
  if (world.size < 1 || world.rank < 0 || world.rank >= world.size ||
      world.local_rank < 0 || world.local_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "expected 0 <= rank < size and 0 <= local_rank, local_size >= 1",
        "; got local_rank ", world.local_rank, ", local_size ",
        world.local_size));
  }
  // 1. Which ranks cannot drive a GPU.
  const std::string problem = LocalProblem(world.local_size);
  const std::string gpu = absl::StrCat(world.prefix, "/gpu/");
  TANDEM_RETURN_IF_ERROR(store.Set(absl::StrCat(gpu, world.rank), problem));
  std::vector<std::string> keys;
  for (int r = 0; r < world.size; ++r) keys.push_back(absl::StrCat(gpu, r));
  if (absl::Status s = store.Wait(keys); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(where, s.message()));
  }
  std::vector<int> failed;
  for (int r = 0; r < world.size; ++r) {
    TANDEM_ASSIGN_OR_RETURN(std::string theirs, store.Get(keys[r]));
    if (!theirs.empty()) failed.push_back(r);
  }
  if (!failed.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "rank(s) ", absl::StrJoin(failed, ", "),
                     " cannot drive a GPU, so no NCCL communicator was created",
                     problem.empty() ? std::string()
                                     : absl::StrCat("; this rank: ", problem)));
  }
  // 2. Rank 0's unique id, with a status byte in front.
  const std::string id_key = absl::StrCat(world.prefix, "/id");
  if (world.rank == 0) {
    absl::StatusOr<NcclUniqueId> id = NcclCommunicator::NewUniqueId();
    std::string message;
    if (id.ok()) {
      message =
          std::string(1, '\1') +
          std::string(reinterpret_cast<const char*>(id->data()), id->size());
    } else {
      message = std::string(1, '\0') + std::string(id.status().message());
    }
    TANDEM_RETURN_IF_ERROR(store.Set(id_key, message));
  }
  TANDEM_ASSIGN_OR_RETURN(std::string message, store.Get(id_key));
  if (message.empty() || message[0] != '\1' ||
      message.size() != 1 + kNcclUniqueIdBytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, "rank 0 could not create the NCCL unique id",
        message.size() > 1 ? absl::StrCat(": ", message.substr(1)) : ""));
  }
  NcclUniqueId id;
  std::memcpy(id.data(), message.data() + 1, kNcclUniqueIdBytes);
  // 3. Join on this node's share of the GPUs.
  TANDEM_ASSIGN_OR_RETURN(CudaProbe probe, ProbeCuda());
  if (probe.device_count == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "the GPUs disappeared: ", probe.no_device_reason));
  }
  return NcclCommunicator::Create(id, world.rank, world.size,
                                  world.local_rank % probe.device_count,
                                  options);
}

}  // namespace tandem::comm
