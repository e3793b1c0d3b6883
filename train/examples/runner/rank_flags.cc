#include "train/examples/runner/rank_flags.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

// "--epochs" -> "epochs": the rule's words name the bare flag.
std::string Bare(const std::string& name) {
  return name.rfind("--", 0) == 0 ? name.substr(2) : name;
}

}  // namespace

RankFlag IntFlag(std::string name, int64_t value, int64_t min, int64_t max) {
  const std::string bare = Bare(name);
  std::string expected = max == std::numeric_limits<int64_t>::max()
                             ? absl::StrCat(bare, " >= ", min)
                             : absl::StrCat(min, " <= ", bare, " <= ", max);
  return RankFlag{.entry = ConfigEntry(std::move(name), value),
                  .ok = value >= min && value <= max,
                  .expected = std::move(expected)};
}

RankFlag RealFlag(std::string name, double value, double min, double max,
                  bool min_open, bool max_open) {
  const std::string bare = Bare(name);
  std::string expected =
      std::isinf(max)
          ? absl::StrCat(bare, min_open ? " > " : " >= ", min, ", finite")
          : absl::StrCat(min, min_open ? " < " : " <= ", bare,
                         max_open ? " < " : " <= ", max);
  const bool ok = std::isfinite(value) &&
                  (min_open ? value > min : value >= min) &&
                  (max_open ? value < max : value <= max);
  return RankFlag{.entry = ConfigEntry(std::move(name), value),
                  .ok = ok,
                  .expected = std::move(expected)};
}

namespace {

// "--epochs=-1 (expected 0 <= epochs <= 10)" for each broken rule.
std::vector<std::string> BrokenRules(const std::vector<RankFlag>& flags) {
  std::vector<std::string> bad;
  for (const RankFlag& f : flags) {
    if (!f.ok) {
      bad.push_back(absl::StrCat(f.entry.name, "=", f.entry.value,
                                 " (expected ", f.expected, ")"));
    }
  }
  return bad;
}

}  // namespace

absl::Status CheckFlagRules(const std::vector<RankFlag>& flags) {
  const std::vector<std::string> bad = BrokenRules(flags);
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(bad, "; "));
}

absl::Status CheckRankFlags(comm::Communicator& comm, Device device,
                            std::string_view who,
                            const std::vector<RankFlag>& flags) {
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(comm, device, Entries(flags)));
  const std::vector<std::string> bad = BrokenRules(flags);
  if (bad.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(who), ": ", absl::StrJoin(bad, "; "),
                   ". Every rank was given ",
                   bad.size() == 1 ? "this value" : "these values",
                   ": fix the flags and start again"));
}

absl::StatusOr<int64_t> PerRankBatch(std::string_view who,
                                     int64_t global_batch_size, int world_size,
                                     int64_t virtual_world) {
  const int64_t ranks = virtual_world > 0 ? virtual_world : world_size;
  if (global_batch_size % ranks == 0) return global_batch_size / ranks;
  const int64_t below = global_batch_size / ranks * ranks;
  const int64_t above = below + ranks;
  const std::string use =
      absl::StrCat("use ", below > 0 ? absl::StrCat(below, " or ") : "", above);
  if (virtual_world > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(who), ": --global_batch_size=", global_batch_size,
        " is not divisible by --virtual_world=", virtual_world,
        " virtual ranks; ", use,
        " (each virtual rank takes global_batch_size / virtual_world samples "
        "per step), or change --virtual_world"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(who), ": --global_batch_size=", global_batch_size,
      " is not divisible by ", world_size, " ranks; ", use,
      " (each rank takes global_batch_size / world size samples per step), "
      "or change the number of ranks"));
}

std::string WorldDescription(const comm::Communicator& comm,
                             int64_t virtual_world) {
  if (virtual_world > 0) return absl::StrCat(virtual_world, " virtual ranks");
  return absl::StrCat(comm.size(), " rank(s) on ", std::string(comm.backend()));
}

std::vector<RankFlag> WithCheckpointFlags(
    std::vector<RankFlag> flags,
    const checkpoint::CheckpointOptions& checkpoint) {
  flags.push_back(Flag("--checkpoint_dir", checkpoint.dir));
  flags.push_back(Flag("--checkpoint_every", checkpoint.every_steps));
  return flags;
}

std::vector<ConfigEntry> Entries(const std::vector<RankFlag>& flags) {
  std::vector<ConfigEntry> entries;
  for (const RankFlag& f : flags) {
    if (f.agreed) entries.push_back(f.entry);
  }
  return entries;
}

}  // namespace tandem::train
