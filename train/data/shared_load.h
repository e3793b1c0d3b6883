// SharedLoad: load a read-only value once per process and hand the same copy
// to every caller that asks for it while it is in use, e.g. a data set that
// every simulated rank (a thread) of one process trains on. With N ranks in
// a process, memory is one copy instead of N, and the file is parsed once.
//
//   static SharedLoad<Split> cache;   // one per kind of value
//   absl::StatusOr<std::shared_ptr<const Split>> split = cache.Get(
//       key, [&]() -> absl::StatusOr<Split> { return LoadAndSplit(...); });
//
// Contract:
//   * `key` must name everything the value depends on (the file and its
//     size and modification time, every option): equal keys give the same
//     object while any caller still holds it.
//   * The cache keeps entries weakly: once the last holder drops the value it
//     is freed, and the next Get loads again (a later run sees a rewritten
//     file).
//   * Thread-safe. Concurrent Gets of one key load once: the first caller
//     runs `load` (holding that key's lock, not the cache's), the others
//     block until it returns. The wait is bounded by the load itself. A
//     failed load is not cached: each waiting caller then tries again and
//     returns its own error.
//   * The value is shared and const: callers must not cast the const away.
#ifndef TANDEM_TRAIN_DATA_SHARED_LOAD_H_
#define TANDEM_TRAIN_DATA_SHARED_LOAD_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"

namespace tandem::train {

template <typename T>
class SharedLoad {
 public:
  absl::StatusOr<std::shared_ptr<const T>> Get(
      const std::string& key, absl::FunctionRef<absl::StatusOr<T>()> load) {
    std::shared_ptr<Entry> entry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::shared_ptr<Entry>& slot = entries_[key];
      if (slot == nullptr) slot = std::make_shared<Entry>();
      entry = slot;
    }
    std::lock_guard<std::mutex> lock(entry->mu);
    if (std::shared_ptr<const T> held = entry->value.lock()) return held;
    absl::StatusOr<T> loaded = load();
    if (!loaded.ok()) return loaded.status();
    std::shared_ptr<const T> value =
        std::make_shared<const T>(*std::move(loaded));
    entry->value = value;
    loads_.fetch_add(1, std::memory_order_relaxed);
    return value;
  }

  // How many times a value was loaded (not found in use), for tests.
  int64_t loads() const { return loads_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::mutex mu;
    std::weak_ptr<const T> value ABSL_GUARDED_BY(mu);
  };

  mutable std::mutex mu_;
  // Entries are never erased: one small record per distinct key.
  std::map<std::string, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> loads_{0};
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_SHARED_LOAD_H_
