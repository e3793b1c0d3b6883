// Per-rank running values (an epoch's loss sums) carried bit for bit in a
// mid-epoch checkpoint, so that a resumed epoch ends with the line an
// uninterrupted one prints. The training loop's mid_epoch_extra and
// begin_epoch hooks use them:
//
//   hooks.mid_epoch_extra = [&] {
//     return GatherRankValues(comm, device, "digits_ddp",
//                             "digits.epoch_loss_", kNames, sums);
//   };
//   ... first_step > 0:
//   TANDEM_ASSIGN_OR_RETURN(sums, RankValues(loop.resumed_extra(),
//       "digits_ddp", "digits.epoch_loss_", kNames, comm.rank()));
//
// Each value is kept as the decimal of its double's bits under the key
// "<prefix><name>_bits.<rank>".
#ifndef TANDEM_TRAIN_LOOP_RANK_VALUES_H_
#define TANDEM_TRAIN_LOOP_RANK_VALUES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/training_checkpoint.h"

namespace tandem::train {

// Collective: every rank's `values` (one per name) as metadata for rank 0
// to save. In the virtual world a rank holds the values of its m virtual
// ranks, name by name for each in turn (m x names values, the same m on
// every rank): they are keyed by virtual rank (rank r's j-th is r m + j).
// `device` is where the rank trains (the all-gather is staged there).
// InternalError, naming `who`, when the count is not a multiple of the names'.
absl::StatusOr<checkpoint::Metadata> GatherRankValues(
    comm::Communicator& comm, Device device, const std::string& who,
    const std::string& prefix, absl::Span<const char* const> names,
    absl::Span<const double> values);

// Rank `rank`'s values (one per name) from GatherRankValues' metadata;
// InvalidArgument naming `who` and the missing key otherwise.
absl::StatusOr<std::vector<double>> RankValues(
    const checkpoint::Metadata& extra, const std::string& who,
    const std::string& prefix, absl::Span<const char* const> names, int rank);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_RANK_VALUES_H_
