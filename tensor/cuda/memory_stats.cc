#include <bit>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tensor/cuda/memory.h"

namespace tandem::cuda {
namespace {

std::string MiB(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

constexpr int64_t kSmallRound = 512;
constexpr int64_t kLargeThreshold = int64_t{1} << 20;  // 1 MiB

}  // namespace

int64_t RoundAllocationSize(int64_t nbytes) {
  int64_t step = kSmallRound;
  if (nbytes > kLargeThreshold) {
    // A quarter of the largest power of two <= nbytes.
    step =
        static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(nbytes))) / 4;
  }
  return (nbytes + step - 1) / step * step;
}

std::string MemoryStats::ToString() const {
  return absl::StrCat("in use ", MiB(bytes_in_use), " (peak ",
                      MiB(peak_bytes_in_use), "), cached ", MiB(bytes_cached),
                      ", ", num_allocations, " allocations (", num_cache_hits,
                      " from cache), ", num_device_mallocs, " cudaMalloc, ",
                      num_device_frees, " cudaFree");
}

}  // namespace tandem::cuda
