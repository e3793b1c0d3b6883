// The CUDA caching allocator's statistics and cache control.
//
// Device memory for CUDA tensors comes from a caching allocator: a freed
// block goes back to a per-(device, stream) free list keyed by its rounded
// size instead of to cudaFree, and the next request of that size on that
// stream reuses it. A training step that repeats the previous step's
// allocations therefore calls cudaMalloc zero times:
//
//   TANDEM_RETURN_IF_ERROR(Step());                       // warms the cache
//   TANDEM_ASSIGN_OR_RETURN(auto before, cuda::GetMemoryStats(0));
//   TANDEM_RETURN_IF_ERROR(Step());
//   TANDEM_ASSIGN_OR_RETURN(auto after, cuda::GetMemoryStats(0));
//   // after.num_device_mallocs == before.num_device_mallocs
//
// Sizes are rounded up to a multiple of 512 bytes up to 1 MiB, and above
// that to a multiple of a quarter of the size's power-of-two octave (at
// most 25% slack: 1.25, 1.5, 1.75, 2, 2.5, ... MiB). A request is served
// only by a cached block of exactly its rounded size.
//
// Stream semantics: a block is reused only on the stream it was allocated on
// (the allocating thread's current stream, tensor/cuda/cuda.h), where stream
// order guarantees the previous user's kernels finished first. A tensor used
// on another stream (e.g. NCCL's) must be kept alive, or that stream
// synchronised, until the other stream is done with it.
//
// When cudaMalloc runs out of memory, the device's cached blocks are freed
// and the allocation retried once; then the error is ResourceExhausted with
// the statistics.
//
// Thread-safety: all functions may be called from any thread (one mutex).
#ifndef TANDEM_TENSOR_CUDA_MEMORY_H_
#define TANDEM_TENSOR_CUDA_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tandem::cuda {

struct MemoryStats {
  int64_t bytes_in_use = 0;        // rounded sizes of live blocks
  int64_t peak_bytes_in_use = 0;   // maximum of bytes_in_use so far
  int64_t bytes_cached = 0;        // freed blocks kept for reuse
  int64_t num_allocations = 0;     // Allocate calls with nbytes > 0
  int64_t num_cache_hits = 0;      // ... served from the cache
  int64_t num_device_mallocs = 0;  // cudaMalloc calls that succeeded
  int64_t num_device_frees = 0;    // cudaFree calls (EmptyCache, OOM retry)

  // "in use 12.0 MiB (peak 20.0 MiB), cached 8.0 MiB, 40 allocations
  // (35 from cache), 5 cudaMalloc, 0 cudaFree"
  std::string ToString() const;
};

// The size the allocator rounds a request of `nbytes` (> 0) up to: the
// rules above. Pure; the same in every build.
int64_t RoundAllocationSize(int64_t nbytes);

// Statistics of `device` (all zero before its first allocation).
// InvalidArgument for a negative index; FailedPrecondition without CUDA.
absl::StatusOr<MemoryStats> GetMemoryStats(int device);

// Returns every cached (free) block of every device to cudaFree. Blocks in
// use are untouched. Waits for each device's queued work first (cudaFree
// does).
absl::Status EmptyCache();

}  // namespace tandem::cuda

#endif  // TANDEM_TENSOR_CUDA_MEMORY_H_
