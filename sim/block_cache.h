// A per-thread cache of freed blocks of one size, for the objects the
// simulated cluster allocates and frees once per operation per rank (its
// Works). At thousands of ranks per core, glibc's per-thread cache (7 blocks
// per size) overflows on every operation and each free goes the slow way;
// here the last blocks freed on a thread are the next ones handed out there.
//
// With fibers (sim/fiber.h) the thread is the worker: a rank's fiber never
// migrates, so a Work is usually freed on the thread that allocated it. A
// block freed on another thread simply joins that thread's cache.
//
// Thread-safe (each thread has its own cache). Up to kMaxBlocks are kept per
// thread and size; the rest go back to the heap, and a thread's cache is
// freed when the thread ends. Under AddressSanitizer blocks always go back to
// the heap, so a use after free is still caught.
#ifndef TANDEM_SIM_BLOCK_CACHE_H_
#define TANDEM_SIM_BLOCK_CACHE_H_

#include <cstddef>
#include <new>
#include <vector>

namespace tandem::sim::internal {

template <size_t kSize>
class BlockCache {
 public:
  static constexpr size_t kMaxBlocks = 1 << 14;

  static void* Allocate() {
    if constexpr (!kCaching) return ::operator new(kSize);
    std::vector<void*>& free = Local().blocks;
    if (free.empty()) return ::operator new(kSize);
    void* block = free.back();
    free.pop_back();
    return block;
  }

  static void Free(void* block) {
    if constexpr (kCaching) {
      std::vector<void*>& free = Local().blocks;
      if (free.size() < kMaxBlocks) {
        free.push_back(block);
        return;
      }
    }
    ::operator delete(block, kSize);
  }

 private:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kCaching = false;
#else
  static constexpr bool kCaching = true;
#endif

  struct Blocks {
    std::vector<void*> blocks;
    ~Blocks() {
      for (void* b : blocks) ::operator delete(b, kSize);
    }
  };
  static Blocks& Local() {
    thread_local Blocks blocks;
    return blocks;
  }
};

// An allocator over BlockCache, for std::allocate_shared of the per-operation
// shared state (the control block and the object in one cached block).
template <typename T>
struct CachedAllocator {
  using value_type = T;
  CachedAllocator() = default;
  template <typename U>
  CachedAllocator(const CachedAllocator<U>&) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(BlockCache<sizeof(T)>::Allocate());
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) {
      ::operator delete(p, n * sizeof(T));
      return;
    }
    BlockCache<sizeof(T)>::Free(p);
  }
  template <typename U>
  bool operator==(const CachedAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CachedAllocator<U>&) const {
    return false;
  }
};

// A base that gives class T (its most derived type) BlockCache allocation:
// `class SimWork : public comm::Work, public RecycledPerThread<SimWork>`, for
// the objects made once per operation per rank. A class derived from T, of
// another size, goes to the heap.
template <typename T>
struct RecycledPerThread {
  static void* operator new(size_t size) {
    if (size != sizeof(T)) return ::operator new(size);
    return BlockCache<sizeof(T)>::Allocate();
  }
  static void operator delete(void* block, size_t size) {
    if (size != sizeof(T)) {
      ::operator delete(block, size);
      return;
    }
    BlockCache<sizeof(T)>::Free(block);
  }
};

}  // namespace tandem::sim::internal

#endif  // TANDEM_SIM_BLOCK_CACHE_H_
