#include "comm/engine.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace tandem::comm {
namespace {

struct Registration {
  int order;
  Engine (*make)();
};

struct Registrations {
  std::mutex mu;
  std::vector<Registration> list;  // guarded by mu
};

// Constructed on first use, so a registration from any translation unit's
// static initialiser finds it ready; never destroyed, so a static destructor
// elsewhere may still read it.
Registrations& All() {
  static Registrations* const all = new Registrations;
  return *all;
}

}  // namespace

bool RegisterEngine(int order, Engine (*make)()) {
  Registrations& all = All();
  std::lock_guard<std::mutex> lock(all.mu);
  all.list.push_back({order, make});
  return true;
}

std::vector<Engine> RegisteredEngines() {
  std::vector<Registration> list;
  {
    Registrations& all = All();
    std::lock_guard<std::mutex> lock(all.mu);
    list = all.list;
  }
  std::vector<std::pair<int, Engine>> made;
  made.reserve(list.size());
  for (const Registration& r : list) made.emplace_back(r.order, r.make());
  // Stable on (order, name): independent of the initialisation order.
  std::stable_sort(made.begin(), made.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first
                              : a.second.name < b.second.name;
  });
  std::vector<Engine> engines;
  engines.reserve(made.size());
  for (auto& [order, engine] : made) engines.push_back(std::move(engine));
  return engines;
}

}  // namespace tandem::comm
