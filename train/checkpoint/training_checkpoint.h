// Training checkpoints: everything a run needs to continue bit for bit.
//
//   TrainingState state{.model = model.get(), .optimizer = &sgd};
//   // After a step (rank 0 only: the ranks hold identical copies):
//   TANDEM_RETURN_IF_ERROR(SaveTrainingCheckpoint(
//       dir, state, {.epoch = 1, .step_in_epoch = 3, .global_step = 8}));
//   // At start-up (every rank):
//   TANDEM_ASSIGN_OR_RETURN(std::optional<TrainingProgress> resumed,
//                           LoadTrainingCheckpoint(dir, state));
//
// Files in `dir` (written by SaveTrainingCheckpoint, each atomically: see
// atomic_file.h):
//   model.safetensors           the model's state dict under PyTorch's names
//                               ("layers.0.weight"), loadable by
//                               safetensors.torch.load_file +
//                               model.load_state_dict; metadata "format": "pt",
//                               "tandem.global_step" and "tandem.checkpoint"
//   training_state.safetensors  the optimizer's per-parameter state as tensors
//                               "optimizer.<i>.<key>" (Optimizer::ExportState),
//                               and as metadata: epoch, step_in_epoch,
//                               global_step, world_size, the optimizer's lr,
//                               its parameter groups (PyTorch's
//                               "param_groups": param_groups_metadata.h),
//                               each generator's state ("generator.<name>"),
//                               the caller's extra
//                               entries (e.g. a GradScaler's scale), and
//                               "tandem.checkpoint"
// The data order needs no file: DistributedSampler's order is a function of
// its seed and the epoch (SetEpoch), both fixed by the run's flags and the
// saved epoch.
//
// Saving is a two-phase commit, so that a process killed at any instant
// (a preempted or SIGKILLed worker) leaves a checkpoint the restarted run can
// resume from:
//   1. both files are written in full under pending names
//      ("<file>.next", each atomically);
//   2. the pending training state is renamed over the old one, then the
//      pending model over the old model.
// Both files record global_step and the pair's checkpoint id,
// "tandem.checkpoint" = "<model hash>-<training state hash>", each the
// FNV-1a hash (16 hex digits) of that file's bytes as encoded without the
// id entry. Loading looks at the committed and the pending file of each kind
// and takes the newest training state and model that were saved together
// (the same step and id, and each file's content hashes to its half of the
// id): a kill during phase 1 leaves the previous pair,
// a kill between the two renames leaves the new training state beside the
// new pending model (the save had finished writing: it is taken). Loading
// never changes the folder (every rank may load at once); the next save
// replaces the pending files. Only files edited, copied or removed by hand
// can leave no such pair: a training state without a model, a model without
// a training state, or a model from another run (even at the same step).
// LoadTrainingCheckpoint refuses these as "torn" (FailedPrecondition naming
// each file, its step, its id and its content hash) rather than resume from
// a mix.
//
// Thread-safety: none; blocking file I/O. The model and optimizer must not be
// used by another thread meanwhile.
#ifndef TANDEM_TRAIN_CHECKPOINT_TRAINING_CHECKPOINT_H_
#define TANDEM_TRAIN_CHECKPOINT_TRAINING_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/optim/optimizer.h"
#include "train/checkpoint/safetensors.h"

namespace tandem::train::checkpoint {

inline constexpr char kModelFile[] = "model.safetensors";
inline constexpr char kTrainingStateFile[] = "training_state.safetensors";
// Appended to a file's name while a save is in phase 1 (see above).
inline constexpr char kPendingSuffix[] = ".next";

// Where a run stands: the next step to run is step `step_in_epoch` (0-based)
// of epoch `epoch` (0-based); `global_step` steps have been taken in all.
struct TrainingProgress {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t global_step = 0;
  int64_t world_size = 1;  // the run's world size (a resume must match it)
  // Loaded checkpoints only: the pair's id ("tandem.checkpoint", above), a
  // fingerprint of both files' content.
  std::string checkpoint_id;
};

// The full state of a model and optimizer that are sharded across ranks
// (ZeRO, FSDP): what an unsharded run would hold, gathered by the caller
// (a collective, on every rank) before rank 0 saves it.
struct FullTrainingState {
  nn::StateDict model;                       // Module::StateDict's names
  std::vector<optim::StateEntry> optimizer;  // Optimizer::ExportState's
  double lr = 0;
  // Optimizer::ExportParamGroups's over the model's parameter indices;
  // empty saves none.
  std::vector<optim::ParamGroupState> param_groups;
};

// What a checkpoint saves and restores. Not owned; each must outlive the
// call. `generators` are named (the name keys the metadata entry).
//
// An unsharded run sets `model` and `optimizer`. A sharded one (each rank
// holds part of the state) sets instead, for saving, `full` and, for
// loading, `load_optimizer` and `load_model`, which give each rank its part
// of the full state read from the files (so the files are the same as an
// unsharded run's, whatever the shard mode and world size). Each must be
// all or nothing; the optimizer is loaded first, and if the model then
// does not fit, the optimizer keeps what it loaded (the caller stops).
struct TrainingState {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  const FullTrainingState* full = nullptr;
  std::function<absl::Status(const std::vector<optim::StateEntry>&)>
      load_optimizer;
  std::function<absl::Status(const nn::StateDict&)> load_model;
  // Sharded loading, optional: given the saved parameter groups when the
  // file has them (called after load_optimizer). Unsharded loading restores
  // them into `optimizer` (Optimizer::ImportParamGroups), all or nothing
  // with its state; a file without groups (written before they were saved)
  // leaves the optimizer's groups as built.
  std::function<absl::Status(const std::vector<optim::ParamGroupState>&)>
      load_param_groups;
  std::vector<std::pair<std::string, Generator*>> generators;
  // Extra metadata saved with the training state and handed back on load
  // (a GradScaler's scale and growth tracker, a learning-rate schedule...).
  Metadata extra;
  // What a resume must match, beside the world size: the flags and derived
  // values the run's numbers depend on (name as the user knows it, value as
  // text: "--seed" -> "7", "dataset hash" -> "0f18..."), in order. Saved as
  // metadata "run.<name>"; on load compared before anything changes, every
  // difference named in one FailedPrecondition (resuming another run's
  // checkpoint would mix two runs with exit 0). A checkpoint that records
  // none (written before they were recorded) is not compared; one that lacks
  // a name this run gives shows it as "(not recorded)". When the first entry
  // differs (the training loop puts the program there) only it is named.
  std::vector<std::pair<std::string, std::string>> must_match;
};

// Writes the two files above into `dir` (created if missing, one level),
// by the two-phase commit above. Errors name the file and the failing call;
// a failure or a kill at any point leaves a loadable checkpoint (the
// previous one or this one).
absl::Status SaveTrainingCheckpoint(const std::string& dir,
                                    const TrainingState& state,
                                    const TrainingProgress& progress);

// Creates `dir` (one level) unless it exists. Internal error naming the
// folder and the cause otherwise.
absl::Status CreateCheckpointFolder(const std::string& dir);

// Whether `dir` holds a checkpoint: a committed or pending model file, or a
// committed training state (which without its model is a torn pair).
bool HasTrainingCheckpoint(const std::string& dir);

// Restores `state` from `dir`: nullopt (and nothing changed) when `dir` holds
// no checkpoint, else the saved progress, with `state->extra` replaced by the
// saved extra entries. All or nothing: a damaged file, a model or optimizer
// state that does not fit, no training state and model saved together (a
// torn or mixed pair, only by hand: see the commit above), a missing
// or bad generator entry, or a world size other than `world_size` is an
// error naming the file and what is wrong, and leaves the model, the
// optimizer and the generators as they were.
absl::StatusOr<std::optional<TrainingProgress>> LoadTrainingCheckpoint(
    const std::string& dir, TrainingState& state, int64_t world_size);

}  // namespace tandem::train::checkpoint

#endif  // TANDEM_TRAIN_CHECKPOINT_TRAINING_CHECKPOINT_H_
