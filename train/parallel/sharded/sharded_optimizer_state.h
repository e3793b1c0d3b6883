// The full optimizer state of a sharded optimizer (ZeRO-1/2, FSDP), for
// checkpoints: PyTorch's ZeroRedundancyOptimizer.consolidate_state_dict and
// FSDP's full_optim_state_dict, on tandem's flat, equal shards.
//
// A sharded optimizer steps, on each rank, one tensor per flat buffer (a
// ZeRO bucket or an FSDP unit): a slice of the buffer, whose elements belong
// to the model's parameters at known offsets. The full state is what an
// optimizer of the whole model would export (optim::Optimizer::ExportState):
// entries "<i>.<key>" with i the parameter's index in the model's parameter
// list and tensors of the parameter's shape. So a checkpoint written from
// the full state does not depend on the world size or the shard mode: it is
// the file an unsharded run writes, and it loads into any of them.
//
//   // Save (every rank; rank 0 then writes the result):
//   TANDEM_ASSIGN_OR_RETURN(std::vector<optim::StateEntry> full,
//       GatherFullOptimizerState(comm, zero->ShardLayout(), optimizer));
//   // Load (every rank, from the same full state):
//   TANDEM_RETURN_IF_ERROR(
//       LoadFullOptimizerState(zero->ShardLayout(), full, optimizer, rank));
//
// Keys: the elementwise state of Sgd ("momentum_buffer") and AdamW
// ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"), and AdamW's "step" (an i64
// scalar; every shard steps together, so one value serves every parameter).
// An optimizer with any other key is Unimplemented: its state cannot be
// split elementwise.
//
// Collective: GatherFullOptimizerState (one small all-gather to agree on
// the keys, then one all-gather per flat buffer and key). Local:
// LoadFullOptimizerState. Both belong to the rank's thread.
#ifndef TANDEM_TRAIN_PARALLEL_SHARDED_SHARDED_OPTIMIZER_STATE_H_
#define TANDEM_TRAIN_PARALLEL_SHARDED_SHARDED_OPTIMIZER_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/dtype.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/optim/optimizer.h"
#include "tensor/tensor.h"
#include "train/parallel/core/flat_param.h"

namespace tandem::train {

// One flat buffer of N * shard elements split N ways, and this rank's part.
struct FlatShard {
  // The buffer's layout (flat_param.h): dtype, device, and each member's
  // index in the model's parameter list, name (for messages), offset and
  // shape.
  FlatParamGroup group;
  int64_t shard = 0;  // s: elements per rank (the buffer has N * s)
  // The local optimizer's tensor for this buffer covers elements
  // [local_begin, local_end) of it, inside [rank * s, (rank + 1) * s);
  // local_index is its index in the optimizer's parameters, -1 for none.
  int64_t local_begin = 0;
  int64_t local_end = 0;
  int64_t local_index = -1;
};

// The full state (see the header comment), sorted by parameter index.
// `local` may be null on a rank that holds no shard (every rank must still
// call). Empty when the optimizers have no state yet. Errors: an unknown
// key (Unimplemented), ranks whose optimizers disagree on the keys or the
// step (Internal, naming the ranks), a failed collective.
absl::StatusOr<std::vector<optim::StateEntry>> GatherFullOptimizerState(
    comm::Communicator& comm, const std::vector<FlatShard>& layout,
    const optim::Optimizer* local, absl::Duration timeout = absl::Minutes(30));

// Gives `local` this rank's slice of `full` (a GatherFullOptimizerState or
// an unsharded optimizer's ExportState). All or nothing. InvalidArgument,
// naming the entry and the parameter, for: a malformed name, a parameter
// index the model does not have, an unknown key, a tensor whose shape or
// dtype differs from its parameter's, a step that is not an i64 scalar,
// parameters that share a flat buffer but not the same keys or step.
absl::Status LoadFullOptimizerState(const std::vector<FlatShard>& layout,
                                    const std::vector<optim::StateEntry>& full,
                                    optim::Optimizer* local, int rank);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_SHARDED_SHARDED_OPTIMIZER_STATE_H_
