#include "sim/block_cache.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::sim::internal {
namespace {

#if !defined(__SANITIZE_ADDRESS__)
// The block freed last on a thread is the next one handed out there.
TEST(BlockCacheTest, ReusesTheLastFreedBlockOnTheSameThread) {
  using Cache = BlockCache<48>;
  void* a = Cache::Allocate();
  void* b = Cache::Allocate();
  ASSERT_NE(a, b);
  Cache::Free(a);
  Cache::Free(b);
  EXPECT_EQ(Cache::Allocate(), b);
  EXPECT_EQ(Cache::Allocate(), a);
  Cache::Free(a);
  Cache::Free(b);
}

// A block freed on another thread joins that thread's cache, not this one's
// (checked while that thread, and so its cache, is still alive).
TEST(BlockCacheTest, ABlockFreedElsewhereStaysWithThatThread) {
  using Cache = BlockCache<56>;
  void* mine = Cache::Allocate();
  std::atomic<int> step{0};
  void* reused_there = nullptr;
  std::thread other([&] {
    Cache::Free(mine);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();
    reused_there = Cache::Allocate();
    Cache::Free(reused_there);
  });
  while (step.load() != 1) std::this_thread::yield();
  void* here = Cache::Allocate();
  EXPECT_NE(here, mine);
  step.store(2);
  other.join();
  EXPECT_EQ(reused_there, mine);
  Cache::Free(here);
}
#endif

// Objects made with allocate_shared over the cache are constructed,
// destroyed and their blocks returned (many at once, beyond the cap).
TEST(BlockCacheTest, AllocateSharedConstructsAndDestroys) {
  static std::atomic<int> live{0};
  struct Counted {
    explicit Counted(int v) : value(v) { live.fetch_add(1); }
    ~Counted() { live.fetch_sub(1); }
    int value;
  };
  {
    std::vector<std::shared_ptr<Counted>> many;
    const int n = static_cast<int>(BlockCache<64>::kMaxBlocks) + 100;
    for (int i = 0; i < n; ++i) {
      many.push_back(
          std::allocate_shared<Counted>(CachedAllocator<Counted>(), i));
    }
    EXPECT_EQ(live.load(), n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(many[i]->value, i);
  }
  EXPECT_EQ(live.load(), 0);
}

}  // namespace
}  // namespace tandem::sim::internal
