#include "tensor/cuda/internal/caching_allocator.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/cuda/internal/runtime_internal.h"
#include "tensor/cuda/internal/status.h"
#include "tensor/cuda/memory.h"

namespace tandem::cuda {
namespace internal {
const std::shared_ptr<CachingAllocator>& CachingAllocator::Get() {
  static const auto* instance =
      new std::shared_ptr<CachingAllocator>(new CachingAllocator);
  return *instance;
}

MemoryStats& CachingAllocator::StatsLocked(int device) {
  if (static_cast<int>(stats_.size()) <= device) stats_.resize(device + 1);
  return stats_[device];
}

absl::StatusOr<void*> CachingAllocator::Allocate(Device device,
                                                 int64_t nbytes) {
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the CUDA allocator cannot allocate on ", device.ToString()));
  }
  if (nbytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a negative size: ", nbytes, " bytes"));
  }
  if (nbytes == 0) return nullptr;
  const int d = device.index();
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(d));
  const int64_t size = RoundAllocationSize(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats& stats = StatsLocked(d);
  ++stats.num_allocations;
  void* ptr = nullptr;
  auto it = free_.find(PoolKey{d, stream, size});
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    ++stats.num_cache_hits;
    stats.bytes_cached -= size;
  } else {
    cudaError_t err = cudaMalloc(&ptr, static_cast<size_t>(size));
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky; clear it and retry after a flush
      TANDEM_RETURN_IF_ERROR(FreeCachedLocked(d));
      err = cudaMalloc(&ptr, static_cast<size_t>(size));
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      const absl::Status s = CudaStatus(err, "cudaMalloc");
      return absl::Status(
          s.code(),
          absl::StrCat(s.message(), " allocating ", nbytes,
                       " bytes (rounded to ", size, ") on ", device.ToString(),
                       "; allocator: ", stats.ToString()));
    }
    ++stats.num_device_mallocs;
  }
  live_[ptr] = Block{d, stream, size};
  stats.bytes_in_use += size;
  if (stats.bytes_in_use > stats.peak_bytes_in_use) {
    stats.peak_bytes_in_use = stats.bytes_in_use;
  }
  return ptr;
}

void CachingAllocator::Deallocate(Device, void* ptr, int64_t) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: nothing safe to do
  const Block block = it->second;
  live_.erase(it);
  free_[PoolKey{block.device, block.stream, block.size}].push_back(ptr);
  MemoryStats& stats = StatsLocked(block.device);
  stats.bytes_in_use -= block.size;
  stats.bytes_cached += block.size;
}

absl::Status CachingAllocator::FreeCachedLocked(int device) {
  absl::Status first_error;
  for (auto it = free_.begin(); it != free_.end();) {
    const auto& [d, stream, size] = it->first;
    if (device >= 0 && d != device) {
      ++it;
      continue;
    }
    MemoryStats& stats = StatsLocked(d);
    cudaError_t err = cudaSetDevice(d);
    for (void* ptr : it->second) {
      if (err == cudaSuccess) err = cudaFree(ptr);
      ++stats.num_device_frees;
      stats.bytes_cached -= size;
    }
    if (err != cudaSuccess && first_error.ok()) {
      first_error = CudaStatus(err, "cudaFree (emptying the CUDA cache)");
    }
    it = free_.erase(it);
  }
  return first_error;
}

absl::Status CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  return FreeCachedLocked(-1);
}

MemoryStats CachingAllocator::Stats(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  return StatsLocked(device);
}

absl::Status CachingAllocator::CopyBytes(void* dst, Device dst_device,
                                         const void* src, Device src_device,
                                         int64_t nbytes) {
  if (nbytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot copy a negative size: ", nbytes, " bytes"));
  }
  if (nbytes == 0) return absl::OkStatus();
  const size_t n = static_cast<size_t>(nbytes);
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return absl::OkStatus();
  }
  if (src_device.is_cuda() && dst_device.is_cuda()) {
    if (src_device == dst_device) {
      TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(src_device.index()));
      TANDEM_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream));
      TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      return absl::OkStatus();
    }
    // Let the destination's queued work (which may still use dst) finish,
    // then copy in the source's stream order.
    TANDEM_ASSIGN_OR_RETURN(cudaStream_t dst_stream, Enter(dst_device.index()));
    TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dst_stream));
    TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(src_device.index()));
    TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyPeerAsync(
        dst, dst_device.index(), src, src_device.index(), n, stream));
    TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }
  if (src_device.is_cuda()) {  // device -> host
    TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(src_device.index()));
    TANDEM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }
  // host -> device
  TANDEM_ASSIGN_OR_RETURN(cudaStream_t stream, Enter(dst_device.index()));
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream));
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<MemoryStats> GetMemoryStats(int device) {
  if (device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetMemoryStats: device index ", device, " is negative"));
  }
  return internal::CachingAllocator::Get()->Stats(device);
}

absl::Status EmptyCache() {
  return internal::CachingAllocator::Get()->EmptyCache();
}

}  // namespace tandem::cuda
