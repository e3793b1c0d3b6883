#include "sim/sim_launcher.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "sim/sim.h"

namespace tandem::sim {

SimLauncher::SimLauncher(Options options) : options_(std::move(options)) {}

Options SimLauncher::DefaultOptions() {
  Options options;
  options.timeout = absl::Minutes(1);
  return options;
}

absl::Status SimLauncher::CanRun(int world_size) const {
  if (world_size >= 1 && world_size <= kMaxWorldSize) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the simulated cluster runs 1 to ", kMaxWorldSize,
                   " ranks, not ", world_size));
}

std::vector<comm::RankStatus> SimLauncher::Run(int world_size,
                                               const comm::RankFn& fn) {
  RunResult result = sim::Run(world_size, fn, options_);
  std::vector<comm::RankStatus> out;
  if (!result.launch.ok()) {
    out.push_back({0, result.launch});
    return out;
  }
  for (int r = 0; r < static_cast<int>(result.ranks.size()); ++r) {
    out.push_back({r, result.ranks[r]});
  }
  return out;
}

}  // namespace tandem::sim
