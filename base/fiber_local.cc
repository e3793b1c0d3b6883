#include "base/fiber_local.h"

#include <cstddef>
#include <memory>
#include <vector>

namespace tandem::base {
namespace {

struct Registry {
  std::vector<internal::FiberLocalEntry> entries;
  std::vector<size_t> offsets;  // of each entry in a FiberLocals block
  size_t bytes = 0;
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry;  // never destroyed
  return *registry;
}

}  // namespace

namespace internal {

bool AddFiberLocal(const FiberLocalEntry& entry) {
  Registry& r = GetRegistry();
  const size_t align = entry.align < alignof(std::max_align_t)
                           ? entry.align
                           : alignof(std::max_align_t);
  const size_t offset = (r.bytes + align - 1) / align * align;
  r.entries.push_back(entry);
  r.offsets.push_back(offset);
  r.bytes = offset + entry.size;
  return true;
}

}  // namespace internal

FiberLocals::FiberLocals() {
  const Registry& r = GetRegistry();
  const size_t n =
      (r.bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  storage_ = std::make_unique<std::max_align_t[]>(n == 0 ? 1 : n);
  char* base = reinterpret_cast<char*>(storage_.get());
  for (size_t i = 0; i < r.entries.size(); ++i) {
    r.entries[i].construct(base + r.offsets[i], r.entries[i].initial);
  }
}

FiberLocals::~FiberLocals() {
  const Registry& r = GetRegistry();
  char* base = reinterpret_cast<char*>(storage_.get());
  for (size_t i = 0; i < r.entries.size(); ++i) {
    r.entries[i].destroy(base + r.offsets[i]);
  }
}

void FiberLocals::Swap() {
  const Registry& r = GetRegistry();
  char* base = reinterpret_cast<char*>(storage_.get());
  for (size_t i = 0; i < r.entries.size(); ++i) {
    r.entries[i].swap(base + r.offsets[i], r.entries[i].initial);
  }
}

int NumFiberLocals() { return static_cast<int>(GetRegistry().entries.size()); }

}  // namespace tandem::base
