#include "train/parallel/ddp/ddp_step.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::train {

std::string DdpStepStateName(DdpStepState state) {
  switch (state) {
    case DdpStepState::kIdle:
      return "idle";
    case DdpStepState::kArmedLocal:
      return "armed-local";
    case DdpStepState::kArmedSync:
      return "armed-sync";
    case DdpStepState::kReducing:
      return "reducing";
  }
  return absl::StrCat("state(", static_cast<int>(state), ")");
}

std::string DdpStepCallName(DdpStepCall call) {
  switch (call) {
    case DdpStepCall::kForwardSync:
      return "Forward";
    case DdpStepCall::kForwardLocal:
      return "Forward (NoSync)";
    case DdpStepCall::kForwardNoGrad:
      return "Forward (no grad)";
    case DdpStepCall::kGradReady:
      return "a gradient hook";
    case DdpStepCall::kBackward:
      return "Backward";
    case DdpStepCall::kFinish:
      return "FinishGradientSync";
    case DdpStepCall::kReset:
      return "reset";
  }
  return absl::StrCat("call(", static_cast<int>(call), ")");
}

namespace {

bool IsValid(DdpStepState s) {
  return s >= DdpStepState::kIdle && s <= DdpStepState::kReducing;
}
bool IsValid(DdpStepCall c) {
  return c >= DdpStepCall::kForwardSync && c <= DdpStepCall::kReset;
}

}  // namespace

absl::StatusOr<DdpStepState> NextDdpStepState(DdpStepState from,
                                              DdpStepCall call) {
  using S = DdpStepState;
  using C = DdpStepCall;
  if (IsValid(from) && IsValid(call)) {
    const bool open = from != S::kIdle;
    switch (call) {
      case C::kForwardSync:
        if (from != S::kReducing) return S::kArmedSync;
        break;
      case C::kForwardLocal:
        if (from != S::kReducing) return S::kArmedLocal;
        break;
      case C::kForwardNoGrad:
        if (from != S::kReducing) return from;
        break;
      case C::kGradReady:
        return from == S::kArmedSync ? S::kReducing : from;
      case C::kBackward:
        if (open) return from;
        break;
      case C::kFinish:
        if (open) return S::kIdle;
        break;
      case C::kReset:
        return S::kIdle;
    }
  }
  return absl::FailedPreconditionError(
      absl::StrCat(DdpStepCallName(call), " is not allowed in step state ",
                   DdpStepStateName(from)));
}

}  // namespace tandem::train
