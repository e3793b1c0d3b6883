// SplitPlan: the membership of one Communicator::Split, decided the same way
// on every rank (see "Sub-communicators" in comm/communicator.h), for the
// engines that build sub-communicators themselves (gloo, nccl) and for the
// checks every engine makes before splitting.
//
//   TANDEM_ASSIGN_OR_RETURN(SplitPlan plan, PlanSplit(*this, color, key));
//   if (plan.sub_rank < 0) return nullptr;  // kNoColor
//   ... connect plan.members.size() ranks, this one as plan.sub_rank ...
#ifndef TANDEM_COMM_SPLIT_PLAN_H_
#define TANDEM_COMM_SPLIT_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/communicator.h"

namespace tandem::comm {

struct SplitPlan {
  int color = Communicator::kNoColor;  // this rank's color
  // The parent ranks of this rank's color in sub-rank order (by key, ties by
  // parent rank); empty for kNoColor.
  std::vector<int> members;
  // This rank's place in `members`; -1 for kNoColor.
  int sub_rank = -1;
};

// The membership from every rank's (color, key), all_pairs[2 r] and
// all_pairs[2 r + 1] being rank r's. InvalidArgument naming the first rank
// whose color is below kNoColor (every rank finds the same one). Pure.
absl::StatusOr<SplitPlan> PlanFromGathered(
    int rank, const std::vector<int64_t>& all_pairs);

// A collective of `parent`: all-gathers (color, key) with one checked
// AllGather of 2 int64 per rank (so it is bounded by the engine's timeout
// and a rank that calls something else instead fails with both named), then
// PlanFromGathered. Errors say which rank and why. Host buffers: engines
// whose AllGather takes device memory only gather by other means and call
// PlanFromGathered.
absl::StatusOr<SplitPlan> PlanSplit(Communicator& parent, int color, int key);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_SPLIT_PLAN_H_
