// Register() for CUDA builds, and the static initialiser that runs it when
// //tensor/cuda is linked (the library is alwayslink, so this object is
// kept even though nothing refers to it).
#include <memory>

#include "absl/status/status.h"
#include "tensor/allocator.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/internal/caching_allocator.h"

namespace tandem::cuda {

// The kernels register themselves next to their code (tensor/cuda/ops/,
// TANDEM_REGISTER_KERNEL), in the same static initialisation.
absl::Status Register() {
  return RegisterAllocator(DeviceType::kCUDA,
                           internal::CachingAllocator::Get());
}

namespace {

// Registration cannot fail with the argument above (non-null).
[[maybe_unused]] const bool registered = [] {
  Register().IgnoreError();
  return true;
}();

}  // namespace
}  // namespace tandem::cuda
