// tandem::train::CheckStepFinite — stop a data-parallel run on all ranks
// when a step produced a non-finite loss or parameter.
//
//   for each step:
//     ... forward, ddp->Backward(loss), optimizer.Step() ...
//     TANDEM_ASSIGN_OR_RETURN(double loss_value, loss.Item());
//     TANDEM_ASSIGN_OR_RETURN(
//         StepOutcome outcome,
//         CheckStepFinite(comm, *model, {.epoch = epoch, .step = b,
//                                        .loss = loss_value}));
//
// Collective: every rank calls it after every step, in the same order as its
// other collectives. Each rank looks at its own loss and at its model's
// parameters (in NamedParameters() order) and finds the first non-finite
// value (the loss first); one AllGather of two int64 per rank then tells every
// rank what every rank saw, so all ranks take the same decision and return
// the same error, e.g.
//
//   non-finite values at epoch 1, step 3 (counted from 1): rank 1: loss =
//   inf; rank 0: parameter 0.weight = nan. Every rank stops here. Lower the
//   learning rate (--lr) or look for huge or non-finite values in the data.
//
// A rank whose own data is fine still stops: after DDP's all-reduce one
// rank's inf gradient reaches every rank's parameters, and the gathered
// report names the rank whose loss went non-finite first.
//
// Cost: one AllGather of 2 * world_size int64 per call, staged through
// device memory when the model is not on the CPU (see staged_all_gather.h),
// plus, when `check_parameters`, one scan of the parameters (a vectorised
// integer max over their bits; parameters off the CPU are copied to the host
// first). The scan reads every parameter: on the large MLP of
// bench/ddp_benchmark.cc (25 M parameters) it is about 4 % of a step, so
// trainers scan every kParameterCheckInterval steps and at the end of each
// epoch, and judge the loss at every step: a non-finite parameter then
// stops the run within that many steps (usually at the next step, through
// a non-finite loss). ddp_benchmark's ddp_checked mode measures the cost.
//
// GradScaler (not there yet): a scaler that found non-finite gradients
// skips the optimizer step and passes outcome = kSkipped; the check then
// returns kSkipped (the trainer counts it) instead of an error, as PyTorch
// skips such steps, and checks only the parameters, which the skipped step
// left alone. The loss is not judged on a skipped step.
#ifndef TANDEM_TRAIN_PARALLEL_CORE_FINITE_CHECK_H_
#define TANDEM_TRAIN_PARALLEL_CORE_FINITE_CHECK_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/nn/module.h"

namespace tandem::train {

// What happened to the optimizer step this check follows.
enum class StepOutcome {
  kApplied,  // the optimizer updated the parameters
  kSkipped,  // a GradScaler found non-finite gradients and skipped the update
};

struct StepCheck {
  int64_t epoch = 0;  // 0-based; messages print epoch + 1
  int64_t step = 0;   // 0-based step within the epoch; printed + 1
  double loss = 0;    // this rank's loss of the step (loss.Item())
  // Every rank must pass the same outcome (a scaler decides it from
  // all-reduced gradients, so it agrees).
  StepOutcome outcome = StepOutcome::kApplied;
  // Also scan the parameters (see Cost above). Ranks may differ here.
  bool check_parameters = true;
};

// How often trainers scan the parameters: with the large MLP's 4 % per
// scan, 1/16 of that keeps the check under 1 % of the step.
inline constexpr int64_t kParameterCheckInterval = 16;

// Whether step `step` (0-based) of an epoch of `steps_per_epoch` steps is
// one that scans the parameters: every kParameterCheckInterval-th step of
// the epoch and its last step.
bool ParameterCheckDue(int64_t step, int64_t steps_per_epoch);

// Returns `check.outcome` when every rank's loss (unless skipped) and
// parameters (if asked; f32 or f64, else InvalidArgument) are finite.
// Otherwise FailedPrecondition, the same on
// every rank, naming the epoch, the step, each rank that saw a non-finite value
// with the first such value's name ("loss" or the parameter's name) and
// value, and a hint. Errors of the communicator (a timeout, a peer that
// failed) come back as they are.
absl::StatusOr<StepOutcome> CheckStepFinite(comm::Communicator& comm,
                                            const nn::Module& model,
                                            const StepCheck& check);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_CORE_FINITE_CHECK_H_
