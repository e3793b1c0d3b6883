// tandem::train::FoundInfAcrossRanks — the combiner that makes every rank's
// GradScaler take the same skip decision (tensor/optim/grad_scaler.h).
//
//   scaler.set_found_inf_combiner(FoundInfAcrossRanks(comm, device));
//
// The scaler passes its rank's found_inf; the combiner all-gathers one
// int64 per rank (train/parallel/core/staged_all_gather.h, any engine) and
// returns true when any rank found an inf or NaN. Needed wherever ranks can
// hold different gradients after their reduction (a sharded optimizer, a
// gradient changed after DDP's all-reduce); under plain DDP the averaged
// gradients already agree and it only costs one small collective.
//
// Collective: every rank's scaler must unscale the same optimizers in the
// same order, since each Unscale calls it once. `comm` must outlive the
// returned function. Bounded by `timeout` and the communicator's own.
#ifndef TANDEM_TRAIN_PARALLEL_CORE_FOUND_INF_H_
#define TANDEM_TRAIN_PARALLEL_CORE_FOUND_INF_H_

#include "absl/time/time.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "tensor/optim/grad_scaler.h"

namespace tandem::train {

optim::FoundInfCombiner FoundInfAcrossRanks(
    comm::Communicator& comm, Device device,
    absl::Duration timeout = absl::Minutes(5));

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_FOUND_INF_H_
