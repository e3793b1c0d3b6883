#include "train/checkpoint/training_checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/param_groups_metadata.h"
#include "train/checkpoint/safetensors.h"
#include "train/parallel/core/config_agreement.h"

namespace tandem::train::checkpoint {
namespace {

constexpr char kOptimizerPrefix[] = "optimizer.";
constexpr char kGeneratorPrefix[] = "generator.";
constexpr char kExtraPrefix[] = "extra.";
constexpr char kMustMatchPrefix[] = "run.";
constexpr char kGlobalStepKey[] = "tandem.global_step";
constexpr char kCheckpointIdKey[] = "tandem.checkpoint";

std::string Join(const std::string& dir, const char* file) {
  return dir.empty() || dir.back() == '/' ? dir + file : dir + "/" + file;
}

absl::StatusOr<int64_t> IntEntry(const Metadata& m, const std::string& key,
                                 const std::string& file) {
  auto it = m.find(key);
  int64_t value = 0;
  if (it != m.end()) {
    const char* end = it->second.data() + it->second.size();
    const std::from_chars_result r =
        std::from_chars(it->second.data(), end, value);
    if (r.ec == std::errc() && r.ptr == end && value >= 0) return value;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint file ", file, ": metadata entry \"", key,
      "\" is missing or not an integer >= 0; the file was not written by "
      "tandem's SaveTrainingCheckpoint (or is damaged): start from a fresh "
      "--checkpoint_dir"));
}

std::string Pending(const std::string& path) { return path + kPendingSuffix; }

// The content hash of a file's tensors and metadata without the checkpoint
// id entry: FNV-1a of the bytes EncodeSafetensors gives for them (the bytes
// the file held before the id was added; encoding is deterministic).
absl::StatusOr<std::string> ContentHash(const nn::StateDict& tensors,
                                        Metadata metadata) {
  metadata.erase(kCheckpointIdKey);
  TANDEM_ASSIGN_OR_RETURN(const std::string bytes,
                          EncodeSafetensors(tensors, metadata));
  return HashHex(HashBytes(bytes.data(), bytes.size()));
}

// One file of a checkpoint as read: its global step, the checkpoint id it
// records ("<model hash>-<training state hash>", empty when absent) and the
// hash of its own content.
struct ReadFileWithStep {
  std::string path;
  SafetensorsContent content;
  int64_t step = 0;
  std::string id;
  std::string hash;
};

// The committed file at `path` and its pending twin, those that exist.
absl::StatusOr<std::vector<ReadFileWithStep>> ReadCandidates(
    const std::string& path) {
  std::vector<ReadFileWithStep> out;
  for (const std::string& p : {path, Pending(path)}) {
    if (!FileExists(p)) continue;
    ReadFileWithStep f;
    f.path = p;
    TANDEM_ASSIGN_OR_RETURN(f.content, LoadSafetensors(p));
    TANDEM_ASSIGN_OR_RETURN(f.step,
                            IntEntry(f.content.metadata, kGlobalStepKey, p));
    auto id = f.content.metadata.find(kCheckpointIdKey);
    if (id != f.content.metadata.end()) f.id = id->second;
    TANDEM_ASSIGN_OR_RETURN(f.hash,
                            ContentHash(f.content.tensors, f.content.metadata));
    out.push_back(std::move(f));
  }
  return out;
}

// Whether `model` and `training` were saved together: the same step, the
// same checkpoint id, and each file's content is the one the id records.
bool SavedTogether(const ReadFileWithStep& model,
                   const ReadFileWithStep& training) {
  return model.step == training.step && !model.id.empty() &&
         model.id == training.id &&
         model.id == absl::StrCat(model.hash, "-", training.hash);
}

// Why no model and training state of `dir` form a pair (FailedPrecondition
// naming every file, its step and checkpoint id).
absl::Status NoPairError(const std::string& dir,
                         const std::vector<ReadFileWithStep>& models,
                         const std::vector<ReadFileWithStep>& states) {
  std::string found;
  for (const auto* files : {&models, &states}) {
    for (const ReadFileWithStep& f : *files) {
      absl::StrAppend(&found, found.empty() ? "" : "; ", f.path, ": step ",
                      f.step, ", checkpoint ",
                      f.id.empty() ? "(none recorded)" : f.id,
                      ", content hash ", f.hash);
    }
  }
  std::string why;
  if (models.empty()) {
    why =
        absl::StrCat("there is a ", kTrainingStateFile, " but no ", kModelFile);
  } else if (states.empty()) {
    why =
        absl::StrCat("there is a ", kModelFile, " but no ", kTrainingStateFile);
  } else {
    bool same_step = false;
    for (const ReadFileWithStep& m : models) {
      for (const ReadFileWithStep& t : states) same_step |= m.step == t.step;
    }
    why = same_step ? "mixed: a model and a training state share a global "
                      "step but were not saved together (a file copied "
                      "from another run, or edited)"
                    : "no model and training state share a global step";
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint in ", dir, " is torn: ", why, " (", found,
      "); a checkpoint is the pair saved together: restore both files from "
      "one save, or start from a fresh --checkpoint_dir"));
}

// The differences between what this run must match and what the checkpoint
// recorded (TrainingState::must_match).
absl::Status CheckMustMatch(
    const std::vector<std::pair<std::string, std::string>>& now,
    const Metadata& saved, const std::string& dir) {
  bool recorded_any = false;
  for (const auto& [key, value] : saved) {
    recorded_any = recorded_any || absl::StartsWith(key, kMustMatchPrefix);
  }
  if (!recorded_any) return absl::OkStatus();
  std::vector<std::string> differences;
  for (size_t i = 0; i < now.size(); ++i) {
    const auto& [name, value] = now[i];
    auto it = saved.find(kMustMatchPrefix + name);
    const std::string there = it == saved.end() ? "(not recorded)" : it->second;
    if (there == value) continue;
    differences.push_back(
        absl::StrCat(name, " is ", there, " there and ", value, " here"));
    // The first entry may name what wrote the checkpoint (the training
    // loop puts the program there): when it differs, the rest is another
    // program's and not worth listing.
    if (i == 0) break;
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint in ", dir,
      " was written by another run: ", absl::StrJoin(differences, "; "),
      ". A resume continues that run exactly, so what its numbers depend on "
      "must match (only the length of the run, the checkpoint cadence, the "
      "outputs and the engine may change); nothing was loaded: resume with "
      "the checkpoint's values or start from a fresh --checkpoint_dir"));
}

}  // namespace

absl::Status SaveTrainingCheckpoint(const std::string& dir,
                                    const TrainingState& state,
                                    const TrainingProgress& progress) {
  if (state.full == nullptr &&
      (state.model == nullptr || state.optimizer == nullptr)) {
    return absl::InvalidArgumentError(
        "SaveTrainingCheckpoint: the model and the optimizer (or their full "
        "state) are required");
  }
  TANDEM_RETURN_IF_ERROR(CreateCheckpointFolder(dir));
  const std::string step = absl::StrCat(progress.global_step);
  Metadata meta = {{"format", "tandem-training-state"},
                   {kGlobalStepKey, step},
                   {"epoch", absl::StrCat(progress.epoch)},
                   {"step_in_epoch", absl::StrCat(progress.step_in_epoch)},
                   {"world_size", absl::StrCat(progress.world_size)},
                   {"optimizer.lr", absl::StrCat(state.full != nullptr
                                                     ? state.full->lr
                                                     : state.optimizer->lr())}};
  for (const auto& [name, gen] : state.generators) {
    meta[kGeneratorPrefix + name] = gen->State();
  }
  for (const auto& [key, value] : state.extra) meta[kExtraPrefix + key] = value;
  for (const auto& [name, value] : state.must_match) {
    meta[kMustMatchPrefix + name] = value;
  }
  AddParamGroupsMetadata(state.full != nullptr
                             ? state.full->param_groups
                             : state.optimizer->ExportParamGroups(),
                         meta);
  nn::StateDict optimizer_tensors;
  for (const optim::StateEntry& e : state.full != nullptr
                                        ? state.full->optimizer
                                        : state.optimizer->ExportState()) {
    optimizer_tensors.push_back({kOptimizerPrefix + e.name, e.tensor});
  }
  // Phase 1: both files in full under their pending names.
  const std::string state_path = Join(dir, kTrainingStateFile);
  const std::string model_path = Join(dir, kModelFile);
  // Both files record the pair's id: the content hash of each (without the
  // id), so that a file from another save never passes for this one's twin.
  const nn::StateDict model_tensors =
      state.full != nullptr ? state.full->model : state.model->StateDict();
  Metadata model_meta = {{"format", "pt"}, {kGlobalStepKey, step}};
  TANDEM_ASSIGN_OR_RETURN(const std::string model_hash,
                          ContentHash(model_tensors, model_meta));
  TANDEM_ASSIGN_OR_RETURN(const std::string state_hash,
                          ContentHash(optimizer_tensors, meta));
  const std::string id = absl::StrCat(model_hash, "-", state_hash);
  meta[kCheckpointIdKey] = id;
  model_meta[kCheckpointIdKey] = id;
  TANDEM_RETURN_IF_ERROR(
      SaveSafetensors(Pending(state_path), optimizer_tensors, meta));
  TANDEM_RETURN_IF_ERROR(
      SaveSafetensors(Pending(model_path), model_tensors, model_meta));
  // Phase 2: commit, the model last (see the header).
  TANDEM_RETURN_IF_ERROR(RenameDurably(Pending(state_path), state_path));
  return RenameDurably(Pending(model_path), model_path);
}

absl::Status CreateCheckpointFolder(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat(
        "checkpoint: cannot create the folder ", dir, ": ",
        std::strerror(errno), "; pass a --checkpoint_dir whose parent exists"));
  }
  return absl::OkStatus();
}

bool HasTrainingCheckpoint(const std::string& dir) {
  // A pending training state alone is a first save killed in phase 1.
  const std::string model = Join(dir, kModelFile);
  return FileExists(model) || FileExists(Pending(model)) ||
         FileExists(Join(dir, kTrainingStateFile));
}

absl::StatusOr<std::optional<TrainingProgress>> LoadTrainingCheckpoint(
    const std::string& dir, TrainingState& state, int64_t world_size) {
  const bool sharded = state.load_model && state.load_optimizer;
  if (!sharded && (state.model == nullptr || state.optimizer == nullptr)) {
    return absl::InvalidArgumentError(
        "LoadTrainingCheckpoint: the model and the optimizer (or their "
        "loaders) are required");
  }
  if (!HasTrainingCheckpoint(dir)) return std::nullopt;
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReadFileWithStep> models,
                          ReadCandidates(Join(dir, kModelFile)));
  TANDEM_ASSIGN_OR_RETURN(std::vector<ReadFileWithStep> states,
                          ReadCandidates(Join(dir, kTrainingStateFile)));
  // The newest model and training state saved together (see the header).
  ReadFileWithStep* model = nullptr;
  ReadFileWithStep* training = nullptr;
  for (ReadFileWithStep& m : models) {
    for (ReadFileWithStep& t : states) {
      if (SavedTogether(m, t) && (model == nullptr || m.step > model->step)) {
        model = &m;
        training = &t;
      }
    }
  }
  if (model == nullptr) return NoPairError(dir, models, states);
  const std::string& model_path = model->path;
  const std::string& state_path = training->path;
  SafetensorsContent& model_file = model->content;
  SafetensorsContent& state_file = training->content;
  TrainingProgress progress;
  progress.global_step = training->step;
  progress.checkpoint_id = training->id;
  TANDEM_ASSIGN_OR_RETURN(progress.epoch,
                          IntEntry(state_file.metadata, "epoch", state_path));
  TANDEM_ASSIGN_OR_RETURN(
      progress.step_in_epoch,
      IntEntry(state_file.metadata, "step_in_epoch", state_path));
  TANDEM_ASSIGN_OR_RETURN(
      progress.world_size,
      IntEntry(state_file.metadata, "world_size", state_path));
  // What the run must match first: it names the flag (--virtual_world
  // changes the data's world size too, and says so better).
  TANDEM_RETURN_IF_ERROR(
      CheckMustMatch(state.must_match, state_file.metadata, dir));
  if (progress.world_size != world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint in ", dir, " was written by a run of world size ",
        progress.world_size, " but this run has ", world_size,
        "; the data order and steps per epoch depend on it: resume with "
        "--world_size=",
        progress.world_size, " or start from a fresh --checkpoint_dir"));
  }
  TANDEM_RETURN_IF_ERROR(CheckFiniteTensors(model_file.tensors, model_path));
  TANDEM_RETURN_IF_ERROR(CheckFiniteTensors(state_file.tensors, state_path));
  // Everything is checked before anything changes.
  std::vector<std::pair<Generator*, Generator>> generators;
  for (const auto& [name, gen] : state.generators) {
    auto it = state_file.metadata.find(kGeneratorPrefix + name);
    Generator restored = *gen;
    if (it == state_file.metadata.end() ||
        !restored.SetState(it->second).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint file ", state_path, ": generator \"", name,
          "\" is missing or damaged; start from a fresh --checkpoint_dir"));
    }
    generators.emplace_back(gen, restored);
  }
  TANDEM_ASSIGN_OR_RETURN(
      const std::optional<std::vector<optim::ParamGroupState>> param_groups,
      ReadParamGroupsMetadata(state_file.metadata, state_path));
  std::vector<optim::StateEntry> optimizer_state;
  const std::string prefix = kOptimizerPrefix;
  for (nn::NamedTensor& nt : state_file.tensors) {
    if (nt.name.compare(0, prefix.size(), prefix) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint file ", state_path, ": unexpected tensor \"",
                       nt.name, "\" (expected only optimizer.<i>.<key>)"));
    }
    optimizer_state.push_back(
        {nt.name.substr(prefix.size()), std::move(nt.tensor)});
  }
  if (sharded) {
    if (absl::Status s = state.load_optimizer(optimizer_state); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("checkpoint file ", state_path,
                                                 ": ", s.message()));
    }
    if (param_groups.has_value() && state.load_param_groups) {
      if (absl::Status s = state.load_param_groups(*param_groups); !s.ok()) {
        return absl::Status(
            s.code(),
            absl::StrCat("checkpoint file ", state_path, ": ", s.message()));
      }
    }
    if (absl::Status s = state.load_model(model_file.tensors); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("checkpoint file ", model_path,
                                 " does not fit the model: ", s.message()));
    }
  } else {
    // The optimizer first (all or nothing), then the model (all or nothing);
    // if the model refuses, the optimizer gets its old state back.
    std::vector<optim::StateEntry> old_optimizer;
    for (const optim::StateEntry& e : state.optimizer->ExportState()) {
      TANDEM_ASSIGN_OR_RETURN(Tensor copy, e.tensor.Clone());
      old_optimizer.push_back({e.name, copy});
    }
    const std::vector<optim::ParamGroupState> old_groups =
        state.optimizer->ExportParamGroups();
    // Groups over another number of parameters mean another model: say so
    // (as the model check below would) before touching anything.
    if (param_groups.has_value()) {
      auto count = [](const std::vector<optim::ParamGroupState>& groups) {
        int64_t n = 0;
        for (const optim::ParamGroupState& g : groups) n += g.params.size();
        return n;
      };
      if (count(*param_groups) != count(old_groups)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint file ", state_path,
            " does not fit the model (nothing was loaded): its optimizer "
            "covers ",
            count(*param_groups), " parameter(s) and this model has ",
            count(old_groups),
            "; resume with the model that wrote it, or start from a fresh "
            "--checkpoint_dir"));
      }
    }
    if (absl::Status s = state.optimizer->ImportState(optimizer_state);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("checkpoint file ", state_path,
                                                 ": ", s.message()));
    }
    if (param_groups.has_value()) {
      if (absl::Status s = state.optimizer->ImportParamGroups(*param_groups);
          !s.ok()) {
        TANDEM_RETURN_IF_ERROR(state.optimizer->ImportState(old_optimizer));
        return absl::Status(
            s.code(),
            absl::StrCat("checkpoint file ", state_path, ": ", s.message()));
      }
    }
    if (absl::Status s = state.model->LoadStateDict(model_file.tensors);
        !s.ok()) {
      TANDEM_RETURN_IF_ERROR(state.optimizer->ImportState(old_optimizer));
      TANDEM_RETURN_IF_ERROR(state.optimizer->ImportParamGroups(old_groups));
      return absl::Status(
          s.code(),
          absl::StrCat(
              "checkpoint file ", model_path,
              " does not fit the model (nothing was loaded): ", s.message()));
    }
  }
  for (auto& [gen, restored] : generators) *gen = restored;
  state.extra.clear();
  const std::string extra = kExtraPrefix;
  for (const auto& [key, value] : state_file.metadata) {
    if (key.compare(0, extra.size(), extra) == 0) {
      state.extra[key.substr(extra.size())] = value;
    }
  }
  return progress;
}

}  // namespace tandem::train::checkpoint
