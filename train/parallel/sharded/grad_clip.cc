#include "train/parallel/sharded/grad_clip.h"

#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "tensor/optim/clip_grad.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {

absl::StatusOr<double> ClipShardedGradNorm(
    comm::Communicator& comm, Device device,
    const std::vector<Tensor>& shard_grads, double max_norm,
    const optim::ClipGradNormOptions& options, absl::Duration timeout) {
  TANDEM_RETURN_IF_ERROR(optim::CheckClipArguments(max_norm, options));
  absl::StatusOr<double> mine =
      optim::GradNormPart(shard_grads, options.norm_type);
  // Every rank joins the all-reduce even after a local error, so no peer is
  // left waiting; [1] says a part was NaN (Max may drop NaN on some
  // engines), [2] that a rank failed (then every rank fails, nothing
  // scaled).
  double parts[3] = {mine.ok() ? *mine : 0, 0, mine.ok() ? 0.0 : 1.0};
  if (std::isnan(parts[0])) {
    parts[0] = 0;
    parts[1] = 1;
  }
  const comm::ReduceOp op = std::isinf(options.norm_type)
                                ? comm::ReduceOp::kMax
                                : comm::ReduceOp::kSum;
  absl::Status reduced =
      AllReduceF64(comm, device, absl::MakeSpan(parts), op, timeout);
  if (!mine.ok()) {
    return absl::Status(
        mine.status().code(),
        absl::StrCat("rank ", comm.rank(), ": ", mine.status().message()));
  }
  if (!reduced.ok()) {
    return absl::Status(
        reduced.code(),
        absl::StrCat("ClipGradNorm on rank ", comm.rank(),
                     ": the all-reduce of the gradient norm's parts failed: ",
                     reduced.message()));
  }
  if (parts[2] != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ClipGradNorm on rank ", comm.rank(),
        ": another rank could not measure its gradient shard (its error "
        "says why); nothing was clipped"));
  }
  const double part = parts[1] != 0 ? std::nan("") : parts[0];
  const double total = optim::TotalNormFromPart(part, options.norm_type);
  TANDEM_RETURN_IF_ERROR(
      optim::ScaleGradsToNorm(shard_grads, max_norm, total, options));
  return total;
}

}  // namespace tandem::train
