// The per-step state of DistributedDataParallel as one explicit state
// machine: which of its calls may come next, and what each one leads to.
// DDP keeps one DdpStepState and moves it only through NextDdpStepState, so
// an out-of-order call (Backward without Forward, Forward while a reduction
// is unfinished, ...) is an error that names the state and the call instead
// of a silent mix-up of flags.
//
// States (one DDP step: Forward, backward, FinishGradientSync):
//   kIdle       no step is open: nothing to reduce.
//   kArmedLocal a DDP Forward ran in grad mode inside NoSync(): its backward
//               accumulates local gradients only.
//   kArmedSync  a synchronised DDP Forward ran in grad mode; no gradient has
//               arrived yet.
//   kReducing   a gradient arrived in a synchronised step: buckets are being
//               marked ready and may be in flight until FinishGradientSync.
//
// Calls and transitions (I idle, L armed-local, S armed-sync, R reducing;
// "-" is an error):
//                Forward   Forward    Forward    grad   Backward Finish Reset
//                (sync)    (NoSync)   (no grad)  hook
//   kIdle          S         L          I         I       -        -      I
//   kArmedLocal    S         L          L         L       L        I      I
//   kArmedSync     S         L          S         R       S        I      I
//   kReducing      -         -          -         R       R        I      I
// GradReady in kIdle is legal and changes nothing: the module was run
// directly (not through DDP), so its gradients stay local. Backward checks
// only that a step is open; its hooks and its FinishGradientSync make the
// transitions. Reset abandons a step (after a failed backward).
//
// Errors are FailedPrecondition and read "<call> is not allowed in step
// state <state>"; DDP puts its rank and what to do in front.
//
//   TANDEM_ASSIGN_OR_RETURN(DdpStepState next,
//                           NextDdpStepState(state, DdpStepCall::kFinish));
//
// Pure functions; thread-safe.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_DDP_STEP_H_
#define TANDEM_TRAIN_PARALLEL_DDP_DDP_STEP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tandem::train {

enum class DdpStepState : int8_t { kIdle, kArmedLocal, kArmedSync, kReducing };

enum class DdpStepCall : int8_t {
  kForwardSync,    // DDP Forward in grad mode, outside NoSync()
  kForwardLocal,   // DDP Forward in grad mode, inside NoSync()
  kForwardNoGrad,  // DDP Forward with grad mode off (evaluation)
  kGradReady,      // a parameter's post-accumulate-grad hook fired
  kBackward,       // DDP Backward(loss)
  kFinish,         // FinishGradientSync()
  kReset,          // abandon the step (a failed backward)
};

// "idle", "armed-local", "armed-sync", "reducing"; "state(<n>)" otherwise.
std::string DdpStepStateName(DdpStepState state);
// "Forward", "Forward (NoSync)", "Forward (no grad)", "a gradient hook",
// "Backward", "FinishGradientSync", "reset"; "call(<n>)" otherwise.
std::string DdpStepCallName(DdpStepCall call);

// The state after `call` in state `from` (the table above), or
// FailedPrecondition naming both when the call is not allowed there (or
// either value is outside its enum).
absl::StatusOr<DdpStepState> NextDdpStepState(DdpStepState from,
                                              DdpStepCall call);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_DDP_STEP_H_
