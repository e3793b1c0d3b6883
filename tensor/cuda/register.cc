// Register() for CUDA builds, and the static initialiser that runs it when
// //tensor/cuda is linked (the library is alwayslink, so this object is
// kept even though nothing refers to it).
#include <memory>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "tensor/allocator.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/internal/caching_allocator.h"
#include "tensor/cuda/internal/cuda_ops.h"
#include "tensor/device_ops.h"

namespace tandem::cuda {

absl::Status Register() {
  TANDEM_RETURN_IF_ERROR(
      RegisterAllocator(DeviceType::kCUDA, internal::CachingAllocator::Get()));
  static const auto* ops = new std::shared_ptr<internal::CudaOps>(
      std::make_shared<internal::CudaOps>());
  return RegisterDeviceOps(DeviceType::kCUDA, *ops);
}

namespace {

// Registration cannot fail with the arguments above (both non-null).
[[maybe_unused]] const bool registered = [] {
  Register().IgnoreError();
  return true;
}();

}  // namespace
}  // namespace tandem::cuda
