// GlooCommunicator::Split (see "Sub-communicators" in gloo_communicator.h):
// membership by PlanSplit's all-gather over the parent, then one new
// GlooCommunicator per color, bootstrapped through the parent's store.
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/gloo/gloo_communicator.h"
#include "comm/split_plan.h"

namespace tandem::comm {

absl::StatusOr<std::unique_ptr<Communicator>> GlooCommunicator::Split(int color,
                                                                      int key) {
  // Every rank counts its splits alike (Split is a collective issued in the
  // same order everywhere), so the number names this split on every rank.
  const int64_t split = splits_++;
  absl::StatusOr<SplitPlan> plan = PlanSplit(*this, color, key);
  if (!plan.ok()) return plan.status();
  if (plan->sub_rank < 0) return nullptr;
  GlooOptions options = split_base_;
  options.rank = plan->sub_rank;
  options.size = static_cast<int>(plan->members.size());
  options.prefix =
      absl::StrCat(split_base_.prefix, "/split", split, "/color", color);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> child =
      GlooCommunicator::Create(options);
  if (!child.ok()) {
    return absl::Status(
        child.status().code(),
        absl::StrCat("Split ", split, " on gloo rank ", rank(), " (color ",
                     color, ", sub-rank ", plan->sub_rank, " of ", options.size,
                     "): connecting the sub-communicator failed: ",
                     child.status().message(),
                     "; every rank of the color must reach this Split"));
  }
  return std::unique_ptr<Communicator>(std::move(*child));
}

}  // namespace tandem::comm
