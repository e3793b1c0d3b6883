// tensor/cuda/cuda.h and memory.h for builds without a CUDA toolkit (or
// with TANDEM_NO_CUDA=1): no device, and a registered kCUDA allocator whose
// every allocation explains that CUDA is not built in.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/allocator.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/memory.h"

namespace tandem::cuda {
namespace {

constexpr char kNoCuda[] =
    "tandem was built without CUDA (no toolkit was found at build time, or "
    "TANDEM_NO_CUDA=1); install a CUDA toolkit and rebuild, or use "
    "Device::CPU()";

absl::Status NoCuda(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": ", kNoCuda));
}

class NoCudaAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override {
    return NoCuda(
        absl::StrCat("allocating ", nbytes, " bytes on ", device.ToString()));
  }
  void Deallocate(Device, void*, int64_t) override {}
  absl::Status CopyBytes(void*, Device dst_device, const void*,
                         Device src_device, int64_t nbytes) override {
    return NoCuda(absl::StrCat("copying ", nbytes, " bytes from ",
                               src_device.ToString(), " to ",
                               dst_device.ToString()));
  }
};

}  // namespace

bool BuiltWithCuda() { return false; }

int DeviceCount(std::string* reason) {
  if (reason != nullptr) *reason = kNoCuda;
  return 0;
}

absl::Status Register() {
  static const auto* allocator =
      new std::shared_ptr<Allocator>(std::make_shared<NoCudaAllocator>());
  return RegisterAllocator(DeviceType::kCUDA, *allocator);
}

absl::StatusOr<CudaStreamHandle> CurrentStream(int device) {
  return NoCuda(absl::StrCat("CurrentStream(cuda:", device, ")"));
}

absl::Status SetCurrentStream(int device, CudaStreamHandle) {
  return NoCuda(absl::StrCat("SetCurrentStream(cuda:", device, ")"));
}

absl::Status Synchronize(int device) {
  return NoCuda(absl::StrCat("Synchronize(cuda:", device, ")"));
}

void SetAllowTf32(bool) {}
bool AllowTf32() { return false; }

absl::StatusOr<MemoryStats> GetMemoryStats(int device) {
  return NoCuda(absl::StrCat("GetMemoryStats(cuda:", device, ")"));
}

absl::Status EmptyCache() { return absl::OkStatus(); }

namespace {

[[maybe_unused]] const bool registered = [] {
  Register().IgnoreError();
  return true;
}();

}  // namespace
}  // namespace tandem::cuda
