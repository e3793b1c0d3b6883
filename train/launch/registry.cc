#include "train/launch/registry.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/launcher.h"

namespace tandem::train {
namespace {

// The variable through which the launcher announced the world size.
std::string WorldVariable(const comm::LaunchEnv& env) {
  if (env.launcher == "torchrun") return "WORLD_SIZE";
  if (env.launcher == "Slurm") return "SLURM_NTASKS";
  return "OMPI_COMM_WORLD_SIZE";
}

// What to run instead: the engines that join a world started by `env`'s
// launcher, or, when none does, the engines that join some other launcher's.
std::string JoinAdvice(const std::vector<Engine>& engines,
                       const comm::LaunchEnv& env) {
  std::vector<std::string> here;
  std::vector<std::string> elsewhere;
  for (const Engine& e : engines) {
    if (!e.joins_launched_world) continue;
    const bool joins = std::find(e.launchers.begin(), e.launchers.end(),
                                 env.launcher) != e.launchers.end();
    (joins ? here : elsewhere).push_back("--backend=" + e.name);
  }
  const std::string alone =
      "run one process without the launcher and choose --world_size";
  if (!here.empty()) {
    return absl::StrCat("Instead use ", absl::StrJoin(here, " or "),
                        " (each process one rank), or ", alone);
  }
  if (env.launcher == "torchrun" && !elsewhere.empty()) {
    return absl::StrCat(
        "No tandem engine joins a torchrun world here: start the job with "
        "mpirun -np ",
        env.world_size, " <binary> ", absl::StrJoin(elsewhere, " or "),
        " (each process one rank), or ", alone);
  }
  return absl::StrCat("Instead ", alone);
}

// Why an engine that hosts the whole world in this process cannot run inside
// a launched world of more than one process.
absl::Status PrivateWorldError(const std::vector<Engine>& engines,
                               const std::string& asked,
                               const comm::LaunchEnv& env) {
  return absl::FailedPreconditionError(absl::StrCat(
      "--backend=", asked, " in a job of ", env.world_size,
      " processes started by ", env.launcher, " (", WorldVariable(env), "=",
      env.world_size, ", this is rank ", env.rank,
      "): every process would run its own private world and the job would "
      "run ",
      env.world_size, " times. ", JoinAdvice(engines, env)));
}

}  // namespace

absl::Status LaunchRegistry::Add(Engine engine) {
  if (engine.name.empty() || engine.name == "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchRegistry::Add: engine name '", engine.name,
                     "' is reserved or empty; give the engine its own name"));
  }
  if (Find(engine.name) != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchRegistry::Add: an engine named '", engine.name,
                     "' is already registered"));
  }
  if (!engine.auto_picks || !engine.default_world_size || !engine.available ||
      !engine.make_launcher) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchRegistry::Add: engine '", engine.name,
        "' lacks auto_picks, default_world_size, available or make_launcher"));
  }
  engines_.push_back(std::move(engine));
  return absl::OkStatus();
}

const Engine* LaunchRegistry::Find(std::string_view name) const {
  for (const Engine& e : engines_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string LaunchRegistry::Choices() const {
  std::vector<std::string> names;
  for (const Engine& e : engines_) names.push_back(e.name);
  return absl::StrCat(absl::StrJoin(names, ", "), names.empty() ? "" : " or ",
                      "auto");
}

std::string LaunchRegistry::BackendHelp() const {
  std::vector<const Engine*> order;
  std::string help;
  for (const Engine& e : engines_) {
    absl::StrAppend(&help, e.name, " (", e.description, "), ");
    order.push_back(&e);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Engine* a, const Engine* b) {
                     return a->auto_order < b->auto_order;
                   });
  std::vector<std::string> names;
  for (const Engine* e : order) names.push_back(e->name);
  absl::StrAppend(&help, "or auto: the first of ", absl::StrJoin(names, ", "),
                  " that fits here.");
  return help;
}

absl::StatusOr<ResolvedBackend> LaunchRegistry::Resolve(
    const BackendChoice& choice, const LaunchContext& here) const {
  if (choice.world_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world_size=", choice.world_size, "; expected 0 (default) or more"));
  }
  const bool launched = here.launched_world_size() > 1;
  const Engine* engine = nullptr;
  if (choice.backend == "auto") {
    for (const Engine& e : engines_) {
      if (!e.auto_picks(here)) continue;
      if (engine == nullptr || e.auto_order < engine->auto_order) engine = &e;
    }
    if (engine == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("--backend=auto: none of ", Choices(), " can run here"));
    }
  } else {
    engine = Find(choice.backend);
    if (engine == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown --backend=", choice.backend, "; expected ", Choices()));
    }
  }
  // An engine that hosts its world in-process may still run one rank per
  // process under the launchers it lists (nccl under torchrun).
  const bool listed =
      launched && std::find(engine->launchers.begin(), engine->launchers.end(),
                            here.launch->launcher) != engine->launchers.end();
  if (launched && !engine->joins_launched_world && !listed) {
    return PrivateWorldError(engines_, choice.backend, *here.launch);
  }
  int n = choice.world_size == 0 ? engine->default_world_size(here)
                                 : choice.world_size;
  // A launched world of one process (mpirun -np 1, tandemrun
  // --nproc_per_node=1, WORLD_SIZE=1 RANK=0) is a world of one rank, never
  // a private world of the engine's default size.
  if (here.launch.has_value() && here.launch->world_size == 1 && n != 1) {
    if (choice.world_size != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--world_size=", choice.world_size,
                       ": this process was started by ", here.launch->launcher,
                       " as a world of 1 process, so it trains as 1 rank; drop "
                       "--world_size, or launch ",
                       choice.world_size, " processes"));
    }
    n = 1;
  }
  if (absl::Status s = engine->available(n, here); !s.ok()) {
    const std::string size =
        choice.world_size == 0 ? "" : absl::StrCat(" --world_size=", n);
    return absl::Status(s.code(), absl::StrCat("--backend=", engine->name, size,
                                               ": ", s.message()));
  }
  return ResolvedBackend{engine->name, n};
}

absl::Status LaunchRegistry::Run(const ResolvedBackend& backend,
                                 const RunOptions& options,
                                 const RankMain& fn) const {
  const Engine* engine = Find(backend.backend);
  if (engine == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchRegistry::Run: unknown backend '", backend.backend,
                     "'; expected ", Choices()));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchRegistry::Run: timeout ", absl::FormatDuration(options.timeout),
        "; it must be positive"));
  }
  std::unique_ptr<comm::Launcher> launcher = engine->make_launcher(options);
  if (absl::Status s = launcher->CanRun(backend.world_size); !s.ok()) {
    return s;
  }
  std::vector<comm::RankStatus> statuses =
      launcher->Run(backend.world_size,
                    [&fn](int, comm::Communicator& comm) { return fn(comm); });
  if (engine->on_rank_error) {
    for (const comm::RankStatus& rs : statuses) {
      if (!rs.status.ok()) engine->on_rank_error(rs);
    }
  }
  return comm::MostTellingStatus(statuses);
}

}  // namespace tandem::train
