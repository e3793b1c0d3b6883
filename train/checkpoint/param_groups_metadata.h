// An optimizer's parameter groups (optim::ParamGroupState, PyTorch's
// optimizer.state_dict()["param_groups"]) as safetensors metadata entries,
// for training checkpoints. Flattened like the per-parameter state
// ("optimizer.<i>.<key>"):
//   optimizer.param_groups            the number of groups
//   optimizer.param_groups.<g>.params the group's parameter indices, "0,1,2"
//   optimizer.param_groups.<g>.<key>  each hyper-parameter ("lr",
//                                     "weight_decay", ...), printed with 17
//                                     significant digits (read back exactly)
// Checkpoints written before groups were saved have none of these entries.
// Pure functions; thread-safe.
#ifndef TANDEM_TRAIN_CHECKPOINT_PARAM_GROUPS_METADATA_H_
#define TANDEM_TRAIN_CHECKPOINT_PARAM_GROUPS_METADATA_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/optim/optimizer.h"
#include "train/checkpoint/safetensors.h"

namespace tandem::train::checkpoint {

// Adds the entries above to `meta` (none for an empty `groups`).
void AddParamGroupsMetadata(const std::vector<optim::ParamGroupState>& groups,
                            Metadata& meta);

// The groups saved in `meta`; nullopt when it has none (an older file).
// InvalidArgument naming `file` and the entry for a malformed count, index
// list or value.
absl::StatusOr<std::optional<std::vector<optim::ParamGroupState>>>
ReadParamGroupsMetadata(const Metadata& meta, const std::string& file);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_PARAM_GROUPS_METADATA_H_
