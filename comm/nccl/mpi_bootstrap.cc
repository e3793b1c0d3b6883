#include "comm/nccl/mpi_bootstrap.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/nccl/cuda_probe.h"

namespace tandem::comm {
namespace {

// Why this rank cannot drive a GPU ("" if it can).
std::string LocalProblem(const MpiCommunicator& mpi) {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  if (!probe.ok()) return std::string(probe.status().message());
  if (probe->device_count == 0) return probe->no_device_reason;
  if (mpi.local_size() > probe->device_count) {
    return absl::StrCat(mpi.local_size(), " ranks share this node but it has ",
                        probe->device_count,
                        " visible GPU(s); start at most one rank per GPU");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> CreateNcclCommunicatorFromMpi(
    MpiCommunicator& bootstrap, const NcclOptions& options) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  const std::string where = absl::StrCat(
      "CreateNcclCommunicatorFromMpi on rank ", rank, " of ", size, ": ");

  // 1-2. Which ranks cannot drive a GPU: each sets its own slot.
  const std::string problem = LocalProblem(bootstrap);
  std::vector<int32_t> cannot(size, 0);
  cannot[rank] = problem.empty() ? 0 : 1;
  TANDEM_RETURN_IF_ERROR(
      bootstrap.AllReduce(HostView(absl::MakeSpan(cannot)), ReduceOp::kSum)
          ->Wait());
  std::vector<int> failed;
  for (int r = 0; r < size; ++r) {
    if (cannot[r] != 0) failed.push_back(r);
  }
  if (!failed.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, "rank(s) ", absl::StrJoin(failed, ", "),
                     " cannot drive a GPU, so no NCCL communicator was created",
                     problem.empty() ? std::string()
                                     : absl::StrCat("; this rank: ", problem)));
  }

  // 3. Rank 0's unique id, with a status byte in front.
  std::vector<uint8_t> message(1 + kNcclUniqueIdBytes, 0);
  std::string rank0_error;
  if (rank == 0) {
    absl::StatusOr<NcclUniqueId> id = NcclCommunicator::NewUniqueId();
    if (id.ok()) {
      message[0] = 1;
      std::memcpy(message.data() + 1, id->data(), kNcclUniqueIdBytes);
    } else {
      rank0_error = std::string(id.status().message());
    }
  }
  TANDEM_RETURN_IF_ERROR(
      bootstrap.Broadcast(HostView(absl::MakeSpan(message)), /*root=*/0)
          ->Wait());
  if (message[0] != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, "rank 0 could not create the NCCL unique id",
        rank0_error.empty() ? std::string() : absl::StrCat(": ", rank0_error)));
  }
  NcclUniqueId id;
  std::memcpy(id.data(), message.data() + 1, kNcclUniqueIdBytes);

  // 4. Join on this node's share of the GPUs.
  TANDEM_ASSIGN_OR_RETURN(CudaProbe probe, ProbeCuda());
  if (probe.device_count == 0) {  // checked in step 1; never divide by zero
    return absl::FailedPreconditionError(
        absl::StrCat(where, "the GPUs disappeared: ", probe.no_device_reason));
  }
  const int device = bootstrap.local_rank() % probe.device_count;
  return NcclCommunicator::Create(id, rank, size, device, options);
}

}  // namespace tandem::comm
