#include "bench/rank_memory.h"

#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "tensor/device.h"

namespace tandem::bench {
namespace {

TEST(RankMemoryTest, CountsPerRankInUseAndPeakAndFreesToTheOwner) {
  RankMemory memory(2);
  void* a = nullptr;
  {
    RankMemory::ScopedRank scope(1);
    a = *memory.Allocate(Device::CPU(), 1000);
    void* b = *memory.Allocate(Device::CPU(), 24);
    memory.Deallocate(Device::CPU(), b, 24);
  }
  void* uncounted = *memory.Allocate(Device::CPU(), 64);  // no rank
  EXPECT_EQ(memory.Stats(1).bytes_in_use, 1000);
  EXPECT_EQ(memory.Stats(1).peak_bytes, 1024);
  EXPECT_EQ(memory.Stats(0).bytes_in_use, 0);
  memory.ResetPeak(1);
  EXPECT_EQ(memory.Stats(1).peak_bytes, 1000);
  // Freed on another thread: still rank 1's.
  std::thread other([&] { memory.Deallocate(Device::CPU(), a, 1000); });
  other.join();
  EXPECT_EQ(memory.Stats(1).bytes_in_use, 0);
  memory.Deallocate(Device::CPU(), uncounted, 64);
  EXPECT_EQ(memory.Stats(7).peak_bytes, 0);  // out of range: empty
}

}  // namespace
}  // namespace tandem::bench
