#include "comm/split_plan.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace tandem::comm {

absl::StatusOr<SplitPlan> PlanFromGathered(
    int rank, const std::vector<int64_t>& all_pairs) {
  const int size = static_cast<int>(all_pairs.size() / 2);
  if (rank < 0 || rank >= size || all_pairs.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Split: rank ", rank, " got ", all_pairs.size(),
        " gathered values; expected two (color, key) per rank of the world, "
        "this rank among them"));
  }
  for (int r = 0; r < size; ++r) {
    if (all_pairs[2 * r] < Communicator::kNoColor) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Split: rank ", r, " passed color ", all_pairs[2 * r],
          "; a color must be >= 0, or kNoColor (-1) to take no part"));
    }
  }
  SplitPlan plan;
  plan.color = static_cast<int>(all_pairs[2 * rank]);
  if (plan.color == Communicator::kNoColor) return plan;
  // Members of this color ordered by (key, rank).
  std::vector<std::pair<int64_t, int>> members;
  for (int r = 0; r < size; ++r) {
    if (all_pairs[2 * r] == plan.color) {
      members.push_back({all_pairs[2 * r + 1], r});
    }
  }
  std::sort(members.begin(), members.end());
  for (const auto& [key, r] : members) {
    if (r == rank) plan.sub_rank = static_cast<int>(plan.members.size());
    plan.members.push_back(r);
  }
  return plan;
}

absl::StatusOr<SplitPlan> PlanSplit(Communicator& parent, int color, int key) {
  // A bad color still takes part in the all-gather: the others are waiting
  // in it, and every rank then fails naming this one instead of timing out.
  std::vector<int64_t> mine = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(parent.size()));
  absl::Status gathered = parent
                              .AllGather(HostView(absl::MakeSpan(mine)),
                                         HostView(absl::MakeSpan(all)))
                              ->Wait();
  if (!gathered.ok()) {
    return absl::Status(
        gathered.code(),
        absl::StrCat(
            "Split on ", std::string(parent.backend()), " rank ", parent.rank(),
            ": exchanging colors and keys failed: ", gathered.message()));
  }
  return PlanFromGathered(parent.rank(), all);
}

}  // namespace tandem::comm
