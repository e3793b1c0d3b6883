#include "sim/slot_pool.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "comm/fingerprint.h"
#include "sim/block_cache.h"
#include "sim/group.h"

namespace tandem::sim::internal {

std::shared_ptr<Slot> SlotPool::Take(const comm::Fingerprint& fp,
                                     int world_size, int64_t min_slice_bytes) {
  std::unique_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      slot = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (slot != nullptr) {
    // Outside the lock: O(world size) at 8192 ranks.
    slot->ResetCollective(fp, world_size, min_slice_bytes);
  } else {
    std::vector<int> ranks(world_size);
    for (int r = 0; r < world_size; ++r) ranks[r] = r;
    slot = std::make_unique<Slot>(fp, std::move(ranks), world_size,
                                  min_slice_bytes);
  }
  // The control block (with the deleter) is one cached block, not a malloc.
  return std::shared_ptr<Slot>(slot.release(), GiveBack{shared_from_this()},
                               CachedAllocator<Slot>());
}

void SlotPool::Give(Slot* slot) {
  std::unique_ptr<Slot> owned(slot);
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < kMaxKept) free_.push_back(std::move(owned));
  // Otherwise `owned` frees it (under the lock: a free, not a wait).
}

int SlotPool::kept() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(free_.size());
}

}  // namespace tandem::sim::internal
