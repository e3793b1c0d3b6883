#include "comm/nccl/nccl_launcher.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/staging_communicator.h"

namespace tandem::comm {

NcclLocalLauncher::NcclLocalLauncher(NcclOptions options)
    : options_(std::move(options)) {}

NcclLocalLauncher::~NcclLocalLauncher() = default;

NcclOptions NcclLocalLauncher::DefaultOptions() {
  NcclOptions options;
  options.timeout = absl::Minutes(1);
  return options;
}

int NcclLocalLauncher::DeviceCount() const {
  std::call_once(probed_, [this] { device_count_ = LocalGpuCount(); });
  return device_count_;
}

bool NcclLocalLauncher::SupportsWorldSize(int world_size) const {
  return world_size >= 1 && world_size <= DeviceCount();
}

std::vector<RankStatus> NcclLocalLauncher::Run(int world_size,
                                               const RankFn& fn) {
  std::vector<RankStatus> out;
  if (world_ != nullptr &&
      (world_->world_size() != world_size || !world_->healthy())) {
    world_.reset();  // one world at a time: each holds NCCL buffers per GPU
  }
  if (world_ == nullptr) {
    absl::StatusOr<std::unique_ptr<LocalGpuWorld>> made =
        LocalGpuWorld::Create(world_size, options_);
    if (!made.ok()) {
      out.push_back({0, made.status()});
      return out;
    }
    world_ = *std::move(made);
  }
  LocalRunResult result =
      world_->Run([&](int rank, NcclCommunicator& device) -> absl::Status {
        StagingCommunicator host(device);
        return fn(rank, host);
      });
  if (!result.launch.ok()) {
    out.push_back({0, result.launch});
    return out;
  }
  for (int r = 0; r < static_cast<int>(result.ranks.size()); ++r) {
    out.push_back({r, result.ranks[r]});
  }
  return out;
}

}  // namespace tandem::comm
