// The examples' checkpoint policy (--checkpoint_dir, --checkpoint_every) over
// SaveTrainingCheckpoint / LoadTrainingCheckpoint.
//
//   RunCheckpointer ckpt({.dir = dir, .every_steps = 5}, comm, device,
//                        "toy_ddp");
//   TANDEM_ASSIGN_OR_RETURN(TrainingProgress start, ckpt.Resume(state));
//   for (int64_t epoch = start.epoch; epoch < epochs; ++epoch) {
//     for (int64_t b = epoch == start.epoch ? start.step_in_epoch : 0;
//          b < steps; ++b) {
//       ... one step ...
//       TANDEM_RETURN_IF_ERROR(ckpt.AfterStep(state, epoch, b, steps));
//     }
//   }
//
// Saving: rank 0 only (DDP keeps every rank's model and optimizer identical),
// at the end of every epoch and, with every_steps > 0, after every
// every_steps-th step of the run. Other ranks return at once; nothing is
// communicated. Loading: every rank reads the folder (one every rank can
// read: the same machine, or a shared file system), then the ranks check
// that they all found the same checkpoint (a collective), so that a rank
// that sees another folder (a node without the shared file system, an
// empty folder mounted over it) stops the run before any step instead of
// training from another epoch beside the others.
//
// Thread-safety: one per rank; used by that rank's thread only.
#ifndef TANDEM_TRAIN_CHECKPOINT_RUN_CHECKPOINTER_H_
#define TANDEM_TRAIN_CHECKPOINT_RUN_CHECKPOINTER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/device.h"
#include "train/checkpoint/folder_lock.h"
#include "train/checkpoint/training_checkpoint.h"

namespace tandem::train::checkpoint {

struct CheckpointOptions {
  std::string dir;          // empty: checkpoints off
  int64_t every_steps = 0;  // 0: at epoch ends only; > 0: also every N steps
};

class RunCheckpointer {
 public:
  // `comm` must outlive this; `device` is where the rank's collectives stage
  // their buffers (train::DeviceFor(comm)); `who` starts the resume line
  // ("toy_ddp").
  RunCheckpointer(CheckpointOptions options, comm::Communicator& comm,
                  Device device, std::string who);

  bool enabled() const { return !options_.dir.empty(); }

  // The world size the data's position is a function of, recorded in every
  // checkpoint and required of a resume: the communicator's size unless
  // set (the virtual world sets K, so that any W that plays K resumes).
  void set_data_world_size(int64_t n) { data_world_size_ = n; }
  int64_t data_world_size() const {
    return data_world_size_ > 0 ? data_world_size_ : comm_.size();
  }

  // Every rank, collective when checkpoints are on: with a checkpoint in the
  // folder, restores `state` from it (LoadTrainingCheckpoint; `state`'s
  // loaders must not communicate) and rank 0 prints
  //   "<who>: resuming from <dir> at epoch E, step S (after G steps)"
  // with E and S counted from 1; returns where to start (all zeros without a
  // checkpoint, or when checkpoints are off). Rank 0 first creates the folder
  // if needed and locks it for as long as this object lives (folder_lock.h:
  // a second run on the folder is refused, naming the holder's pid and host;
  // a lock left by a killed run is taken over, said on stderr).
  // Rank 0 checks that it can write in the folder (a probe file, created and
  // removed), so that a bad one fails before training rather than at the
  // first save. InvalidArgument for every_steps < 0.
  //
  // Before returning, the ranks all-gather what each found (the folder, and
  // the step and checkpoint id it resumes from, "no checkpoint", or its load
  // error: CheckRanksAgree, bounded by the communicator's timeout); when
  // they differ every rank returns the same FailedPrecondition naming each
  // rank's view, e.g.
  //   toy_ddp: ranks found different checkpoints ...: ck: step 3,
  //   checkpoint 0f18...-d9e5... on rank 0 and ck: no checkpoint on rank 1
  absl::StatusOr<TrainingProgress> Resume(TrainingState& state);

  // After step `step` (0-based) of `epoch`, which has `steps_in_epoch` steps.
  // Counts the run's steps; on rank 0 saves when the epoch is over, the
  // count is a multiple of every_steps, or `run_ends` (the run stops after
  // this step: a step limit mid-epoch still leaves its checkpoint). The
  // saved progress points at the next step (the next epoch's step 0 after
  // the last step).
  absl::Status AfterStep(const TrainingState& state, int64_t epoch,
                         int64_t step, int64_t steps_in_epoch,
                         bool run_ends = false);

  // Whether the next AfterStep(state, epoch, step, steps_in_epoch) saves (on
  // rank 0). The same answer on every rank, so ranks can gather what rank 0
  // must save (a collective) just before.
  bool SaveDueAfter(int64_t step, int64_t steps_in_epoch,
                    bool run_ends = false) const;

  int64_t global_step() const { return global_step_; }

 private:
  CheckpointOptions options_;
  comm::Communicator& comm_;
  int64_t data_world_size_ = 0;  // 0: comm_.size()
  Device device_;
  std::string who_;
  int64_t global_step_ = 0;
  // Rank 0's hold on the folder, from Resume to this object's end.
  std::optional<FolderLock> lock_;
};

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_RUN_CHECKPOINTER_H_
