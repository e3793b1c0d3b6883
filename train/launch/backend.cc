#include "train/launch/backend.h"

#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/trace/trace.h"
#include "comm/types.h"

namespace tandem::train {

namespace {

// TANDEM_DISTRIBUTED_DEBUG takes PyTorch's TORCH_DISTRIBUTED_DEBUG values;
// anything else is refused (PyTorch too raises on an invalid value) rather
// than silently leaving the collective check as it was.
absl::Status CheckDistributedDebug() {
  const char* value = std::getenv("TANDEM_DISTRIBUTED_DEBUG");
  if (value == nullptr) return absl::OkStatus();
  const std::string_view v(value);
  if (v == "OFF" || v == "INFO" || v == "DETAIL") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "TANDEM_DISTRIBUTED_DEBUG='", value,
      "' is not a debug level; expected OFF (no collective check), INFO "
      "(the binary's default) or DETAIL (check every collective), as "
      "PyTorch's TORCH_DISTRIBUTED_DEBUG, or leave it unset"));
}

}  // namespace

absl::Status CheckLocalRankFlag(int local_rank) {
  if (local_rank == -1) return absl::OkStatus();
  if (local_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--local_rank=", local_rank,
                     ": expected this process's rank on its "
                     "node (>= 0), as torch.distributed.launch appends it"));
  }
  const char* env = std::getenv("LOCAL_RANK");
  if (env == nullptr || std::string_view(env) == absl::StrCat(local_rank)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--local_rank=", local_rank, " disagrees with LOCAL_RANK=", env,
      " in the environment; the launcher set one and something else the "
      "other: drop --local_rank (tandemrun and torchrun set LOCAL_RANK)"));
}

absl::StatusOr<ResolvedBackend> ResolveBackend(const BackendChoice& choice) {
  if (absl::Status s = CheckDistributedDebug(); !s.ok()) return s;
  absl::StatusOr<LaunchContext> here = DetectLaunchContext();
  if (!here.ok()) return here.status();
  return BuiltinEngines().Resolve(choice, *here);
}

absl::Status RunOnBackend(
    const ResolvedBackend& backend,
    const std::function<absl::Status(comm::Communicator&)>& fn,
    const RunOptions& options) {
  // Each rank's events go on its own timeline track (base/trace).
  return BuiltinEngines().Run(backend, options,
                              [&fn](comm::Communicator& comm) {
                                trace::ScopedThreadRank rank(comm.rank());
                                return fn(comm);
                              });
}

Device DeviceFor(const comm::Communicator& comm) {
  const comm::CommDevice where = comm.device();
  if (where.space == comm::MemorySpace::kCuda) {
    return Device::CUDA(where.ordinal);
  }
  return Device::CPU();
}

}  // namespace tandem::train
