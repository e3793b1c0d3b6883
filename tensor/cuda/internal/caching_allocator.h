// Internal (CUDA builds only): the caching allocator behind
// DeviceType::kCUDA (contract and statistics in tensor/cuda/memory.h), and
// the host<->device copies of Tensor::To / CopyFrom.
#ifndef TANDEM_TENSOR_CUDA_INTERNAL_CACHING_ALLOCATOR_H_
#define TANDEM_TENSOR_CUDA_INTERNAL_CACHING_ALLOCATOR_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/allocator.h"
#include "tensor/cuda/memory.h"
#include "tensor/device.h"

namespace tandem::cuda::internal {

class CachingAllocator : public Allocator {
 public:
  // The process's instance (registered for kCUDA by Register()). Leaked:
  // storages may be freed during static destruction.
  static const std::shared_ptr<CachingAllocator>& Get();

  // A block of at least nbytes on `device`, for the calling thread's
  // current stream there (tensor/cuda/memory.h).
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override;
  // Back to the free list of the block's (device, stream); no CUDA call.
  void Deallocate(Device device, void* ptr, int64_t nbytes) override;
  // Host->device, device->host, device->device (same or peer device), on
  // the calling thread's current stream of the device side, then waits for
  // it. cpu->cpu is a memcpy.
  absl::Status CopyBytes(void* dst, Device dst_device, const void* src,
                         Device src_device, int64_t nbytes) override;

  MemoryStats Stats(int device);
  // cudaFree of every cached block (all devices).
  absl::Status EmptyCache();

 private:
  struct Block {
    int device = 0;
    cudaStream_t stream = nullptr;
    int64_t size = 0;
  };
  using PoolKey = std::tuple<int, cudaStream_t, int64_t>;

  MemoryStats& StatsLocked(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // cudaFree of the cached blocks of `device` (every device when -1).
  absl::Status FreeCachedLocked(int device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::mutex mu_;
  std::map<PoolKey, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<void*, Block> live_ ABSL_GUARDED_BY(mu_);
  std::vector<MemoryStats> stats_ ABSL_GUARDED_BY(mu_);  // per device
};

}  // namespace tandem::cuda::internal

#endif  // TANDEM_TENSOR_CUDA_INTERNAL_CACHING_ALLOCATOR_H_
