#include "train/parallel/ddp/join.h"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/types.h"
#include "train/parallel/core/staged_all_gather.h"

namespace tandem::train {

Joinable::~Joinable() {
  if (join_ != nullptr) join_->Forget(this);
}

const JoinOptions* Joinable::join_options() const {
  return join_ == nullptr ? nullptr : &join_->options();
}

absl::StatusOr<std::optional<JoinStep>> Joinable::NotifyJoinContext(
    bool syncs, bool broadcasts) {
  if (join_ == nullptr || !is_first_) return std::nullopt;
  TANDEM_ASSIGN_OR_RETURN(
      JoinStep step, join_->ExchangeStep(1, syncs ? 1 : 0, broadcasts ? 1 : 0,
                                         /*terminate=*/0));
  if (step.terminating_ranks > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Join on rank ", join_->comm_->rank(), ": ", step.terminating_ranks,
        " rank(s) ran out of inputs while ", step.active_ranks,
        " still train, and JoinOptions::throw_on_early_termination asks "
        "every rank to stop; give every rank the same number of batches "
        "(DistributedSampler pads them) or leave the option off to let the "
        "finished ranks shadow the others"));
  }
  return std::optional<JoinStep>(step);
}

Join::Join(std::vector<Joinable*> joinables, const JoinOptions& options)
    : joinables_(std::move(joinables)), options_(options) {}

absl::StatusOr<std::unique_ptr<Join>> Join::Create(
    std::vector<Joinable*> joinables, const JoinOptions& options) {
  if (joinables.empty()) {
    return absl::InvalidArgumentError(
        "Join: no joinables; pass the DistributedDataParallel (and any other "
        "joinable) whose collectives the finished ranks must answer");
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Join: timeout must be positive; got ",
                     absl::FormatDuration(options.timeout)));
  }
  for (size_t i = 0; i < joinables.size(); ++i) {
    if (joinables[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("Join: joinable ", i, " is null"));
    }
    if (joinables[i]->join_ != nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Join: joinable ", i,
          " already takes part in another Join; Finish and destroy that one "
          "first"));
    }
    if (&joinables[i]->join_comm() != &joinables[0]->join_comm()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Join: joinable ", i,
          " uses another communicator than joinable 0; one Join shadows the "
          "collectives of one communicator (PyTorch: one process group)"));
    }
  }
  auto join = std::unique_ptr<Join>(new Join(joinables, options));
  join->comm_ = &joinables[0]->join_comm();
  join->device_ = joinables[0]->join_device();
  for (Joinable* j : joinables) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<JoinHook> hook,
                            j->MakeJoinHook(options));
    join->hooks_.push_back(std::move(hook));
  }
  if (options.enable) {
    bool first = true;
    for (Joinable* j : join->joinables_) {
      j->join_ = join.get();
      j->is_first_ = first;
      first = false;
    }
  }
  return join;
}

void Join::Forget(Joinable* joinable) {
  for (Joinable*& j : joinables_) {
    if (j == joinable) j = nullptr;
  }
  lost_joinable_ = true;
}

Join::~Join() {
  // Only an enabled Join attached itself (and is told of destroyed ones).
  if (!options_.enable) return;
  for (Joinable* j : joinables_) {
    if (j != nullptr && j->join_ == this) {
      j->join_ = nullptr;
      j->is_first_ = false;
    }
  }
}

absl::StatusOr<JoinStep> Join::ExchangeStep(int64_t active, int64_t syncs,
                                            int64_t broadcasts,
                                            int64_t terminate) {
  std::array<int64_t, 4> values = {active, syncs, broadcasts, terminate};
  absl::Status s = AllReduceInt64(*comm_, device_, absl::MakeSpan(values),
                                  comm::ReduceOp::kSum, options_.timeout);
  if (!s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("Join on rank ", comm_->rank(),
                               ": the per-step all-reduce (which ranks still "
                               "train) failed: ",
                               s.message()));
  }
  return JoinStep{.active_ranks = values[0],
                  .syncing_ranks = values[1],
                  .broadcasting_ranks = values[2],
                  .terminating_ranks = values[3]};
}

absl::Status Join::Finish() {
  if (!options_.enable) return absl::OkStatus();
  if (finished_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Join on rank ", comm_->rank(),
        ": Finish called twice; call it once, after this rank's last step"));
  }
  finished_ = true;
  if (lost_joinable_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Join on rank ", comm_->rank(),
        ": a joinable (DistributedDataParallel) was destroyed before "
        "Join::Finish; keep the joinables alive until Finish returns"));
  }
  bool is_last_joiner = true;
  const int64_t terminate = options_.throw_on_early_termination ? 1 : 0;
  while (true) {
    TANDEM_ASSIGN_OR_RETURN(JoinStep step, ExchangeStep(0, 0, 0, terminate));
    if (step.active_ranks == 0) break;
    if (terminate != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Join on rank ", comm_->rank(),
          ": this rank ran out of inputs while ", step.active_ranks,
          " rank(s) still train; JoinOptions::throw_on_early_termination "
          "stops every rank"));
    }
    for (const std::unique_ptr<JoinHook>& hook : hooks_) {
      TANDEM_RETURN_IF_ERROR(hook->MainHook(step));
    }
    is_last_joiner = false;
    ++shadowed_steps_;
  }
  for (const std::unique_ptr<JoinHook>& hook : hooks_) {
    TANDEM_RETURN_IF_ERROR(hook->PostHook(is_last_joiner));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
