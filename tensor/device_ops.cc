#include "tensor/device_ops.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

struct Registry {
  std::mutex mu;
  // Indexed by DeviceType (the kCPU slot stays null). Read without the lock
  // on every op call; written under mu.
  std::array<std::atomic<DeviceOps*>, kNumDeviceTypes> by_type{};
  // Every object ever registered: kept alive so raw pointers stay valid.
  std::vector<std::shared_ptr<DeviceOps>> keep;  // guarded by mu
};

Registry& GetRegistry() {
  static Registry* registry = new Registry;  // leaked: see the header
  return *registry;
}

}  // namespace

absl::Status RegisterDeviceOps(DeviceType type,
                               std::shared_ptr<DeviceOps> ops) {
  if (ops == nullptr) {
    return absl::InvalidArgumentError(
        "RegisterDeviceOps: ops is null; pass a live DeviceOps");
  }
  if (type == DeviceType::kCPU) {
    return absl::InvalidArgumentError(
        "RegisterDeviceOps: the CPU kernels are built in and cannot be "
        "replaced; register device ops for DeviceType::kCUDA or kSim");
  }
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::atomic<DeviceOps*>& slot = r.by_type[static_cast<size_t>(type)];
  if (slot.load(std::memory_order_relaxed) == ops.get()) {
    return absl::OkStatus();  // registered already
  }
  slot.store(ops.get(), std::memory_order_release);
  r.keep.push_back(std::move(ops));
  return absl::OkStatus();
}

absl::StatusOr<DeviceOps*> GetDeviceOps(Device device) {
  DeviceOps* ops = nullptr;
  if (!device.is_cpu()) {
    ops = GetRegistry().by_type[static_cast<size_t>(device.type())].load(
        std::memory_order_acquire);
  }
  if (ops == nullptr && device.is_sim()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no kernels are registered for ", device.ToString(),
        ": simulated devices are not installed in this process; call "
        "InstallSimDevices (tensor/sim/sim_device.h), e.g. through a "
        "binary's --devices flag or TANDEM_SIM_DEVICES"));
  }
  if (ops == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no kernels are registered for ", device.ToString(),
        ": tandem was built without CUDA, or this binary does not link "
        "//tensor/cuda; add that dependency, or use Device::CPU()"));
  }
  return ops;
}

namespace internal {

absl::StatusOr<DeviceOps*> DeviceOpsFor(std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors) {
    if (t.defined() && !t.device().is_cpu()) return GetDeviceOps(t.device());
  }
  return nullptr;
}

}  // namespace internal
}  // namespace tandem
