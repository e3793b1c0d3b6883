#include "tensor/sim_device/sim_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tensor/allocator.h"
#include "tensor/sim_device/sim_internal.h"
#include "tensor/tensor_impl.h"

namespace tandem {
namespace {

constexpr int64_t kMaxSimDevices = 1024;
constexpr int64_t kAlignment = 64;

// (type, index) as a sortable key.
using DeviceKey = std::pair<int, int>;
DeviceKey KeyOf(Device d) { return {static_cast<int>(d.type()), d.index()}; }

struct State {
  std::mutex mu;
  int64_t count = 0;  // guarded by mu
  // guarded by mu
  std::map<std::pair<DeviceKey, DeviceKey>, SimCopyCount> copies;
  std::vector<int64_t> live;  // per device index; guarded by mu
  std::vector<int64_t> peak;  // per device index; guarded by mu
  // How many live simulated aliases view each host root, per device, so a
  // root is charged once (keyed by the root's data pointer).
  std::map<std::pair<const void*, int>, int64_t> alias_refs;  // guarded by mu
};

State& GetState() {
  static State* state = new State;  // leaked: storages may outlive exit
  return *state;
}

void ChargeLocked(State& s, int index, int64_t delta) {
  const size_t i = static_cast<size_t>(index);
  if (s.live.size() <= i) {
    s.live.resize(i + 1, 0);
    s.peak.resize(i + 1, 0);
  }
  s.live[i] += delta;
  s.peak[i] = std::max(s.peak[i], s.live[i]);
}

class SimAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override {
    if (!device.is_sim()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the simulated-device allocator cannot allocate on ",
                       device.ToString()));
    }
    if (nbytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot allocate a negative size: ", nbytes, " bytes"));
    }
    State& s = GetState();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (device.index() < 0 || device.index() >= s.count) {
        return absl::FailedPreconditionError(absl::StrCat(
            device.ToString(), " does not exist: this process has ", s.count,
            " simulated device(s) (sim:0 .. sim:", s.count - 1,
            "); ask for more with --devices=N or ", kSimDevicesEnv, "=N"));
      }
      ChargeLocked(s, device.index(), nbytes);
    }
    if (nbytes == 0) return nullptr;
    const int64_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, static_cast<size_t>(rounded));
    if (p == nullptr) {
      std::lock_guard<std::mutex> lock(s.mu);
      ChargeLocked(s, device.index(), -nbytes);
      return absl::ResourceExhaustedError(
          absl::StrCat("out of host memory allocating ", nbytes, " bytes for ",
                       device.ToString()));
    }
    return p;
  }

  void Deallocate(Device device, void* ptr, int64_t nbytes) override {
    std::free(ptr);
    State& s = GetState();
    std::lock_guard<std::mutex> lock(s.mu);
    ChargeLocked(s, device.index(), -nbytes);
  }

  // Host memory on both sides: a memmove, counted per device pair.
  absl::Status CopyBytes(void* dst, Device dst_device, const void* src,
                         Device src_device, int64_t nbytes) override {
    if (dst_device.is_cuda() || src_device.is_cuda()) {
      return Allocator::CopyBytes(dst, dst_device, src, src_device, nbytes);
    }
    if (nbytes > 0) std::memmove(dst, src, static_cast<size_t>(nbytes));
    State& s = GetState();
    std::lock_guard<std::mutex> lock(s.mu);
    SimCopyCount& c = s.copies[{KeyOf(src_device), KeyOf(dst_device)}];
    c.from = src_device;
    c.to = dst_device;
    c.bytes += nbytes;
    c.copies += 1;
    return absl::OkStatus();
  }
};

// The allocator of alias storages (Storage::Alias): frees nothing; a
// simulated alias's end uncharges its root when it was the last one.
class AliasNotices : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device device, int64_t) override {
    return absl::InternalError(absl::StrCat(
        "the alias allocator cannot allocate (asked for ", device.ToString(),
        "); this is a bug in tensor/sim_device"));
  }
  void Deallocate(Device device, void* ptr, int64_t nbytes) override {
    if (!device.is_sim() || ptr == nullptr) return;
    State& s = GetState();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.alias_refs.find({ptr, device.index()});
    if (it == s.alias_refs.end()) return;
    if (--it->second == 0) {
      s.alias_refs.erase(it);
      ChargeLocked(s, device.index(), -nbytes);
    }
  }
};

std::shared_ptr<Allocator>& AliasAllocator() {
  static auto* a =
      new std::shared_ptr<Allocator>(std::make_shared<AliasNotices>());
  return *a;
}

}  // namespace

namespace sim_internal {

Tensor Relabel(const Tensor& t, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->offset = t.storage_offset();
  impl->shape = t.shape();
  impl->numel = t.numel();
  impl->dtype = t.dtype();
  const std::shared_ptr<Storage>& storage = t.storage();
  if (storage->device() == device) {
    impl->storage = storage;
    return Tensor(std::move(impl));
  }
  // Aliases chain (a host view of a simulated view of a host result keeps
  // that simulated view, and so its charge, alive as long as it lives).
  // A host result is charged to `device` once however many simulated
  // views of it exist; a real simulated allocation is charged already.
  const Storage* root = storage.get();
  while (root->base() != nullptr) root = root->base().get();
  if (device.is_sim() && !root->device().is_sim() && root->data() != nullptr) {
    State& s = GetState();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.alias_refs[{root->data(), device.index()}]++ == 0) {
      ChargeLocked(s, device.index(), root->nbytes());
    }
  }
  impl->storage = Storage::Alias(storage, device, AliasAllocator());
  return Tensor(std::move(impl));
}

}  // namespace sim_internal

absl::Status InstallSimDevices(int64_t count) {
  if (count < 0 || count > kMaxSimDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat("the number of simulated devices must be in 0..",
                     kMaxSimDevices, ", got ", count));
  }
  static const absl::Status registered = [] {
    absl::Status s =
        RegisterAllocator(DeviceType::kSim, std::make_shared<SimAllocator>());
    if (!s.ok()) return s;
    return sim_internal::RegisterSimKernels();
  }();
  if (!registered.ok()) return registered;
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.count = count;
  return absl::OkStatus();
}

int64_t SimDeviceCount() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.count;
}

absl::StatusOr<int64_t> SimDeviceCountFromEnv(int64_t fallback) {
  const char* value = std::getenv(kSimDevicesEnv);
  if (value == nullptr || *value == '\0') return fallback;
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 0 || n > kMaxSimDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        kSimDevicesEnv, "=", value, " is not a number of simulated devices: ",
        "set it to an integer in 0..", kMaxSimDevices, " or unset it"));
  }
  return n;
}

std::vector<SimCopyCount> SimCopyCounters() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<SimCopyCount> out;
  out.reserve(s.copies.size());
  for (const auto& [key, count] : s.copies) out.push_back(count);
  return out;
}

int64_t SimCopiedBytes(Device from, Device to) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.copies.find({KeyOf(from), KeyOf(to)});
  return it == s.copies.end() ? 0 : it->second.bytes;
}

void ResetSimCopyCounters() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.copies.clear();
}

int64_t SimMemoryAllocated(int64_t index) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (index < 0 || index >= static_cast<int64_t>(s.live.size())) return 0;
  return s.live[static_cast<size_t>(index)];
}

int64_t SimMaxMemoryAllocated(int64_t index) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (index < 0 || index >= static_cast<int64_t>(s.peak.size())) return 0;
  return s.peak[static_cast<size_t>(index)];
}

void ResetSimPeakMemory() {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.peak = s.live;
}

}  // namespace tandem
