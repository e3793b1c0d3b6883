// Do all ranks hold the same model? The check DDP and FSDP make before they
// broadcast rank 0's weights: a rank that built another model (a layer more,
// another width, another dtype) would otherwise fail later in a collective
// whose sizes disagree, or, worse, train a different network silently.
//
//   TANDEM_RETURN_IF_ERROR(CheckSameModelOnEveryRank(
//       model, comm, Device::CPU(), "DistributedDataParallel", timeout));
//
// What is compared: the parameters' and the buffers' names, dtypes, shapes
// and requires_grad, in order (not their values: rank 0's are broadcast
// afterwards). Cost: one all-reduce of a hash (the same per rank at any world
// size); only when the hashes differ are the descriptions all-gathered, to
// name the first difference:
//   "<who> (reported on rank R): the ranks hold different models: parameter
//    3 is "fc.weight" f32[10, 64] on rank 0 but "fc.weight" f32[10, 32] on
//    rank 2. Every rank must build the same model ..."
//
// A collective of `comm`: every rank calls it, with the same `who`. Blocking,
// bounded by `timeout` in all. `device` is where the small exchange buffers
// live (the parameters' device, so that engines that move only device memory,
// like nccl, can carry them).
#ifndef TANDEM_TRAIN_PARALLEL_CORE_MODEL_AGREEMENT_H_
#define TANDEM_TRAIN_PARALLEL_CORE_MODEL_AGREEMENT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/nn/module.h"

namespace tandem::train {

// OK when every rank's model has the same description (always with one
// rank). InvalidArgument naming the first difference otherwise; the
// communicator's error (annotated with `who` and the rank) if an exchange
// fails.
absl::Status CheckSameModelOnEveryRank(const nn::Module& module,
                                       comm::Communicator& comm, Device device,
                                       const std::string& who,
                                       absl::Duration timeout);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_MODEL_AGREEMENT_H_
