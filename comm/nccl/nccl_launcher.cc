#include "comm/nccl/nccl_launcher.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "comm/nccl/cuda_probe.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/staging_communicator.h"

namespace tandem::comm {

NcclLocalLauncher::NcclLocalLauncher(NcclOptions options, NcclRankSetup setup)
    : options_(std::move(options)), setup_(std::move(setup)) {}

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

absl::Status NcclLocalLauncher::CanRun(int world_size) const {
  const int gpus = DeviceCount();
  if (gpus == 0) {
    absl::StatusOr<CudaProbe> probe = ProbeCuda();
    return absl::FailedPreconditionError(
        absl::StrCat("nccl needs a CUDA device, and none was found (",
                     probe.ok() ? probe->no_device_reason
                                : std::string(probe.status().message()),
                     ")"));
  }
  if (world_size < 1 || world_size > gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl runs 1 rank per visible CUDA device: ", world_size,
                     " rank(s) asked for, ", gpus,
                     " device(s) visible (CUDA_VISIBLE_DEVICES)"));
  }
  return absl::OkStatus();
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
        if (setup_.prepare) {
          if (absl::Status s = setup_.prepare(device); !s.ok()) return s;
        }
        if (!setup_.stage_host_buffers) return fn(rank, device);
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
