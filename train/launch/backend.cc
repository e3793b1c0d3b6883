#include "train/launch/backend.h"

#include "base/trace/trace.h"
#include "comm/types.h"

namespace tandem::train {

absl::StatusOr<ResolvedBackend> ResolveBackend(const BackendChoice& choice) {
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
