#include "train/checkpoint/run_checkpointer.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/output_file.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "train/parallel/core/config_agreement.h"

namespace tandem::train::checkpoint {
namespace {

// `text` without the "rank <N>: " prefixes errors carry.
std::string WithoutRankNames(const std::string& text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 5, "rank ") == 0) {
      size_t j = i + 5;
      while (j < text.size() &&
             absl::ascii_isdigit(static_cast<unsigned char>(text[j]))) {
        ++j;
      }
      if (j > i + 5 && text.compare(j, 2, ": ") == 0) {
        i = j + 2;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

}  // namespace

RunCheckpointer::RunCheckpointer(CheckpointOptions options,
                                 comm::Communicator& comm, Device device,
                                 std::string who)
    : options_(std::move(options)),
      comm_(comm),
      device_(device),
      who_(std::move(who)) {}

absl::StatusOr<TrainingProgress> RunCheckpointer::Resume(TrainingState& state) {
  if (options_.every_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who_, ": --checkpoint_every=", options_.every_steps,
                     "; expected 0 (epoch ends only) or a step count >= 1"));
  }
  TrainingProgress start;
  start.world_size = data_world_size();
  if (!enabled()) return start;
  // Rank 0 holds the folder for the run before anything reads it: a second
  // run on it is refused here, before it loads a checkpoint the first one
  // may be writing (a failed rank stops the others, as any rank error does).
  if (comm_.rank() == 0) {
    TANDEM_RETURN_IF_ERROR(CreateCheckpointFolder(options_.dir));
    std::string took_over;
    TANDEM_ASSIGN_OR_RETURN(
        FolderLock lock,
        FolderLock::Acquire(
            options_.dir,
            absl::StrCat(who_, ": --checkpoint_dir=", options_.dir),
            &took_over));
    lock_.emplace(std::move(lock));
    if (!took_over.empty()) std::fprintf(stderr, "%s\n", took_over.c_str());
  }
  absl::StatusOr<std::optional<TrainingProgress>> loaded =
      LoadTrainingCheckpoint(options_.dir, state, data_world_size());
  // What this rank found, compared across ranks before anything else.
  std::string view = absl::StrCat(options_.dir, ": ");
  if (!loaded.ok()) {
    // Without the rank's name, so that ranks failing alike agree and each
    // returns its error below, instead of a report that they differ.
    absl::StrAppend(&view, "cannot load (",
                    WithoutRankNames(loaded.status().ToString()), ")");
  } else if (!loaded->has_value()) {
    absl::StrAppend(&view, "no checkpoint");
  } else {
    absl::StrAppend(&view, "step ", (*loaded)->global_step, ", checkpoint ",
                    (*loaded)->checkpoint_id);
  }
  if (absl::Status agreed = CheckRanksAgree(
          comm_, device_, {{"the checkpoint to resume from", view}});
      !agreed.ok()) {
    if (agreed.code() != absl::StatusCode::kInvalidArgument) return agreed;
    return absl::FailedPreconditionError(absl::StrCat(
        who_,
        ": ranks found different checkpoints in --checkpoint_dir, so they "
        "would resume from different steps; nothing was trained or "
        "written. Every rank must read the same folder (one machine, or a "
        "shared file system mounted on every node): ",
        agreed.message()));
  }
  TANDEM_RETURN_IF_ERROR(loaded.status());
  std::optional<TrainingProgress>& resumed = *loaded;
  // Rank 0 writes there later: find a folder it cannot write now, not after
  // an epoch (a failed rank stops the others, as any rank error does).
  if (comm_.rank() == 0) {
    TANDEM_RETURN_IF_ERROR(base::CheckOutputPath(
        absl::StrCat(options_.dir, "/", kModelFile),
        absl::StrCat(who_, ": --checkpoint_dir=", options_.dir)));
  }
  if (!resumed.has_value()) return start;
  global_step_ = resumed->global_step;
  comm::RankPrinter(comm_).PrintOnRank0(
      absl::StrCat(who_, ": resuming from ", options_.dir, " at epoch ",
                   resumed->epoch + 1, ", step ", resumed->step_in_epoch + 1,
                   " (after ", resumed->global_step, " steps)"));
  return *resumed;
}

bool RunCheckpointer::SaveDueAfter(int64_t step, int64_t steps_in_epoch,
                                   bool run_ends) const {
  if (!enabled()) return false;
  const int64_t next = global_step_ + 1;
  return run_ends || step + 1 >= steps_in_epoch ||
         (options_.every_steps > 0 && next % options_.every_steps == 0);
}

absl::Status RunCheckpointer::AfterStep(const TrainingState& state,
                                        int64_t epoch, int64_t step,
                                        int64_t steps_in_epoch, bool run_ends) {
  const bool save = SaveDueAfter(step, steps_in_epoch, run_ends);
  ++global_step_;
  if (!save || comm_.rank() != 0) return absl::OkStatus();
  const bool epoch_over = step + 1 >= steps_in_epoch;
  TrainingProgress next;
  next.epoch = epoch_over ? epoch + 1 : epoch;
  next.step_in_epoch = epoch_over ? 0 : step + 1;
  next.global_step = global_step_;
  next.world_size = data_world_size();
  return SaveTrainingCheckpoint(options_.dir, state, next);
}

}  // namespace tandem::train::checkpoint
