#include "comm/conformance/split_launcher.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::comm::conformance {

SplitLauncher::SplitLauncher(std::shared_ptr<Launcher> parent)
    : parent_(std::move(parent)) {}

std::string SplitLauncher::name() const {
  return absl::StrCat(parent_->name(), "-split");
}

absl::Status SplitLauncher::CanRun(int world_size) const {
  if (world_size < 1 || world_size > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("split world size must be >= 1, got ", world_size));
  }
  return parent_->CanRun(2 * world_size);
}

std::vector<RankStatus> SplitLauncher::Run(int world_size, const RankFn& fn) {
  return parent_->Run(
      2 * world_size, [&](int rank, Communicator& comm) -> absl::Status {
        absl::StatusOr<std::unique_ptr<Communicator>> sub =
            comm.Split(/*color=*/rank % 2, /*key=*/-rank);
        if (!sub.ok()) return sub.status();
        if (*sub == nullptr || (*sub)->size() != world_size) {
          return absl::InternalError(absl::StrCat(
              "Split(", rank % 2, ", ", -rank, ") on rank ", rank, " of ",
              comm.size(), " gave ",
              *sub == nullptr ? std::string("no communicator")
                              : absl::StrCat("a communicator of ",
                                             (*sub)->size(), " ranks"),
              ", expected ", world_size));
        }
        // Key -rank: the highest parent rank of the color is sub-rank 0.
        const int expected_rank = (comm.size() - 1 - rank) / 2;
        if ((*sub)->rank() != expected_rank) {
          return absl::InternalError(absl::StrCat(
              "Split on rank ", rank, ": sub-rank ", (*sub)->rank(),
              ", expected ", expected_rank, " (ordered by key = -rank)"));
        }
        return fn((*sub)->rank(), **sub);
      });
}

}  // namespace tandem::comm::conformance
