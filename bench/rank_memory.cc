#include "bench/rank_memory.h"

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "absl/status/statusor.h"
#include "base/fiber_local.h"

namespace tandem::bench {
namespace {

thread_local int current_rank = -1;
// The rank that allocates follows it when ranks are fibers.
[[maybe_unused]] const bool kRankIsFiberLocal =
    base::RegisterFiberLocal<int>([]() -> int& { return current_rank; }, -1);

}  // namespace

RankMemory::RankMemory(int max_ranks)
    : host_(CpuAllocator()), stats_(std::max(max_ranks, 0)) {}

RankMemory::ScopedRank::ScopedRank(int rank) : previous_(current_rank) {
  current_rank = rank;
}

RankMemory::ScopedRank::~ScopedRank() { current_rank = previous_; }

absl::StatusOr<void*> RankMemory::Allocate(Device device, int64_t nbytes) {
  absl::StatusOr<void*> ptr = host_->Allocate(device, nbytes);
  if (!ptr.ok() || *ptr == nullptr) return ptr;
  const int rank = current_rank;
  std::lock_guard<std::mutex> lock(mu_);
  if (rank >= 0 && rank < static_cast<int>(stats_.size())) {
    RankMemoryStats& s = stats_[rank];
    s.bytes_in_use += nbytes;
    s.peak_bytes = std::max(s.peak_bytes, s.bytes_in_use);
    live_[*ptr] = {rank, nbytes};
  }
  return ptr;
}

void RankMemory::Deallocate(Device device, void* ptr, int64_t nbytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it != live_.end()) {
      stats_[it->second.first].bytes_in_use -= it->second.second;
      live_.erase(it);
    }
  }
  host_->Deallocate(device, ptr, nbytes);
}

RankMemoryStats RankMemory::Stats(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(stats_.size())) return {};
  return stats_[rank];
}

void RankMemory::ResetPeak(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(stats_.size())) return;
  stats_[rank].peak_bytes = stats_[rank].bytes_in_use;
}

}  // namespace tandem::bench
