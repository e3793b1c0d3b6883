// SlotPool: recycles the Slots (sim/group.h) of one group's collectives, so
// that an operation allocates nothing once the pool is warm. A Slot holds
// O(world size) arrays (endpoints, fingerprint flags, the task plan, the
// claim counters): building a new one for every all-reduce cost about seven
// heap allocations and frees, more than the rest of a 2-rank 8-byte
// all-reduce's bookkeeping (callgrind, bench/PERFORMANCE.md).
//
// A slot taken from the pool is handed out as a std::shared_ptr whose
// deleter gives it back (its control block comes from sim/block_cache.h);
// it is reset in place, keeping its arrays' capacity. At most kMaxKept
// slots are kept; the rest are freed. The deleter holds the pool alive, so
// a Work that outlives its group still frees its slot safely.
//
// Thread-safe: Take and the deleter may run on any thread (one short
// std::mutex section each, never held across a wait).
#ifndef TANDEM_SIM_SLOT_POOL_H_
#define TANDEM_SIM_SLOT_POOL_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/fingerprint.h"
#include "sim/group.h"

namespace tandem::sim::internal {

class SlotPool : public std::enable_shared_from_this<SlotPool> {
 public:
  // Slots kept for reuse. Collectives in flight at once beyond this many
  // allocate (DDP keeps one per bucket in flight; more are rare).
  static constexpr int kMaxKept = 16;

  // Create with std::make_shared (the deleters hold a shared_ptr to it).
  SlotPool() = default;
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // A slot equal to a new Slot(fp, {0, ..., world_size - 1}, world_size,
  // min_slice_bytes): recycled when one is free, else allocated.
  std::shared_ptr<Slot> Take(const comm::Fingerprint& fp, int world_size,
                             int64_t min_slice_bytes);

  // Slots kept now (for tests).
  int kept() const;

 private:
  struct GiveBack {
    std::shared_ptr<SlotPool> pool;
    void operator()(Slot* slot) const { pool->Give(slot); }
  };
  void Give(Slot* slot);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> free_;  // guarded by mu_
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_SLOT_POOL_H_
