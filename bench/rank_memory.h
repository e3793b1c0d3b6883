// Per-rank allocator statistics for simulated ranks: a host allocator that
// attributes every tensor allocation to the rank whose thread made it
// (sim's ranks are threads of one process) and keeps, per rank, the bytes
// in use and their peak — the CPU counterpart of the CUDA caching
// allocator's MemoryStats, for measuring what a sharding scheme costs each
// rank.
//
//   auto memory = std::make_shared<RankMemory>(/*max_ranks=*/8);
//   TANDEM_RETURN_IF_ERROR(RegisterAllocator(DeviceType::kCPU, memory));
//   sim::Run(8, [&](int rank, comm::Communicator& comm) {
//     RankMemory::ScopedRank scope(rank);  // this thread's tensors: rank's
//     ...
//     memory->ResetPeak(rank);
//     ... one step ...
//     int64_t peak = memory->Stats(rank).peak_bytes;
//   });
//
// Allocations made on a thread without a ScopedRank are counted nowhere
// (but still served). Memory is freed to the owner's count whatever thread
// frees it. Thread-safe: one mutex around the counts.
#ifndef TANDEM_BENCH_RANK_MEMORY_H_
#define TANDEM_BENCH_RANK_MEMORY_H_

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "tensor/allocator.h"
#include "tensor/device.h"

namespace tandem::bench {

struct RankMemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes = 0;  // max of bytes_in_use since the last ResetPeak
};

class RankMemory : public Allocator {
 public:
  explicit RankMemory(int max_ranks);

  // Attributes this thread's allocations to `rank` while alive (nests).
  class ScopedRank {
   public:
    explicit ScopedRank(int rank);
    ~ScopedRank();
    ScopedRank(const ScopedRank&) = delete;
    ScopedRank& operator=(const ScopedRank&) = delete;

   private:
    int previous_;
  };

  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override;
  void Deallocate(Device device, void* ptr, int64_t nbytes) override;

  RankMemoryStats Stats(int rank) const;
  void ResetPeak(int rank);

 private:
  std::shared_ptr<Allocator> host_;
  mutable std::mutex mu_;
  std::vector<RankMemoryStats> stats_ ABSL_GUARDED_BY(mu_);
  // Live allocation -> (rank, bytes).
  std::unordered_map<void*, std::pair<int, int64_t>> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_RANK_MEMORY_H_
