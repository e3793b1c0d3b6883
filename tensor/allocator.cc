#include "tensor/allocator.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

constexpr int64_t kAlignment = 64;

class HostAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override {
    if (!device.is_cpu()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the CPU allocator cannot allocate on ", device.ToString()));
    }
    if (nbytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot allocate a negative size: ", nbytes, " bytes"));
    }
    if (nbytes == 0) return nullptr;
    // aligned_alloc wants a size that is a multiple of the alignment.
    const int64_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("out of host memory allocating ", nbytes, " bytes"));
    }
    return p;
  }

  void Deallocate(Device, void* ptr, int64_t) override { std::free(ptr); }

  absl::Status CopyBytes(void* dst, Device dst_device, const void* src,
                         Device src_device, int64_t nbytes) override {
    if (!dst_device.is_cpu() || !src_device.is_cpu()) {
      return Allocator::CopyBytes(dst, dst_device, src, src_device, nbytes);
    }
    if (nbytes > 0) std::memcpy(dst, src, static_cast<size_t>(nbytes));
    return absl::OkStatus();
  }
};

struct Registry {
  std::mutex mu;
  // Indexed by DeviceType; guarded by mu.
  std::array<std::shared_ptr<Allocator>, kNumDeviceTypes> by_type;
};

size_t TypeIndex(DeviceType type) { return static_cast<size_t>(type); }

Registry& GetRegistry() {
  // Leaked on purpose: storages may outlive static destruction order.
  static Registry* registry = [] {
    auto* r = new Registry;
    r->by_type[TypeIndex(DeviceType::kCPU)] = CpuAllocator();
    return r;
  }();
  return *registry;
}

}  // namespace

absl::Status Allocator::CopyBytes(void*, Device dst_device, const void*,
                                  Device src_device, int64_t nbytes) {
  return absl::UnimplementedError(absl::StrCat(
      "copying ", nbytes, " bytes from ", src_device.ToString(), " to ",
      dst_device.ToString(), " is not supported by the registered allocator"));
}

std::shared_ptr<Allocator> CpuAllocator() {
  static std::shared_ptr<Allocator>* allocator =
      new std::shared_ptr<Allocator>(std::make_shared<HostAllocator>());
  return *allocator;
}

absl::Status RegisterAllocator(DeviceType type,
                               std::shared_ptr<Allocator> allocator) {
  if (allocator == nullptr) {
    return absl::InvalidArgumentError(
        "RegisterAllocator: allocator is null; pass a live Allocator");
  }
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.by_type[TypeIndex(type)] = std::move(allocator);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Allocator>> GetAllocator(Device device) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::shared_ptr<Allocator> a = r.by_type[TypeIndex(device.type())];
  if (a == nullptr && device.is_sim()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no allocator is registered for ", device.ToString(),
        ": simulated devices are not installed in this process; call "
        "InstallSimDevices (tensor/sim_device/sim_device.h), e.g. through a "
        "binary's --devices flag or TANDEM_SIM_DEVICES"));
  }
  if (a == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no allocator is registered for ", device.ToString(),
        ": this build has no CUDA support or the CUDA allocator was not "
        "registered; use Device::CPU() or call RegisterAllocator first"));
  }
  return a;
}

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(Device device,
                                                           int64_t nbytes) {
  absl::StatusOr<std::shared_ptr<Allocator>> allocator = GetAllocator(device);
  if (!allocator.ok()) return allocator.status();
  absl::StatusOr<void*> data = (*allocator)->Allocate(device, nbytes);
  if (!data.ok()) return data.status();
  return std::shared_ptr<Storage>(
      new Storage(std::move(*allocator), device, *data, nbytes));
}

void Storage::Free() {
  if (data_ == nullptr) return;
  if (base_ != nullptr) {
    // An alias owns no memory: it drops its view (Reallocate gives it memory
    // of its own).
    data_ = nullptr;
    base_.reset();
    return;
  }
  allocator_->Deallocate(device_, data_, nbytes_);
  data_ = nullptr;
}

absl::Status Storage::Reallocate() {
  if (is_allocated()) return absl::OkStatus();
  absl::StatusOr<void*> data = allocator_->Allocate(device_, nbytes_);
  if (!data.ok()) return data.status();
  data_ = *data;
  return absl::OkStatus();
}

std::shared_ptr<Storage> Storage::Alias(std::shared_ptr<Storage> base,
                                        Device device,
                                        std::shared_ptr<Allocator> allocator) {
  void* data = base->data_;
  const int64_t nbytes = base->nbytes_;
  auto alias = std::shared_ptr<Storage>(
      new Storage(std::move(allocator), device, data, nbytes));
  alias->base_ = std::move(base);
  return alias;
}

std::shared_ptr<Storage> Storage::Empty(Device device) {
  return std::shared_ptr<Storage>(new Storage(nullptr, device, nullptr, 0));
}

Storage::~Storage() {
  if (data_ != nullptr) allocator_->Deallocate(device_, data_, nbytes_);
}

}  // namespace tandem
