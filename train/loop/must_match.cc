#include "train/loop/must_match.h"

#include <algorithm>

namespace tandem::train {

const std::vector<std::string>& MayChangeOnResume() {
  static const auto* const names = new std::vector<std::string>{
      "--epochs",
      "--max_steps",
      "--checkpoint_dir",
      "--checkpoint_every",
      "--log_ranks",
      "--loss_precision",
      "--print_step_losses",
      "--sample_tokens",
      "--top_k",
      // digits_ddp's checkpoints are an unsharded run's files in every mode,
      // and every mode computes DDP's numbers. (gpt_ddp's --parallel is not
      // here: its optimizer state is laid out per mode until checkpoints
      // reshard.)
      "--shard",
  };
  return *names;
}

std::vector<std::pair<std::string, std::string>> MustMatchOnResume(
    const std::vector<ConfigEntry>& agreed) {
  const std::vector<std::string>& may_change = MayChangeOnResume();
  std::vector<std::pair<std::string, std::string>> out;
  for (const ConfigEntry& e : agreed) {
    if (std::find(may_change.begin(), may_change.end(), e.name) !=
        may_change.end()) {
      continue;
    }
    out.emplace_back(e.name, e.value);
  }
  return out;
}

}  // namespace tandem::train
