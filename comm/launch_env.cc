#include "comm/launch_env.h"

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem::comm {
namespace {

struct Scheme {
  const char* launcher;
  const char* rank;
  const char* local_rank;  // optional: the rank when absent
  const char* world_size;
  const char* local_world_size;  // optional
  // Further variables only this launcher sets: any of them (or of the
  // above) present means the process was launched, so an incomplete set is
  // an error rather than a private world.
  std::vector<const char*> also;
  const char* how;  // what sets the variables, for the messages
};

const std::vector<Scheme>& Schemes() {
  static const auto* const schemes = new std::vector<Scheme>{
      {"torchrun",
       "RANK",
       "LOCAL_RANK",
       "WORLD_SIZE",
       "LOCAL_WORLD_SIZE",
       {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"},
       "torchrun and tandemrun set RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR "
       "and MASTER_PORT; a process started by hand needs at least RANK and "
       "WORLD_SIZE (and MASTER_ADDR, MASTER_PORT for the store)"},
      // Slurm's other variables (SLURM_JOB_ID, SLURM_NTASKS) are set in an
      // allocation's shell too, outside any job step: only SLURM_PROCID and
      // SLURM_LOCALID, which srun sets per task, mark a launched process.
      {"OpenMPI",
       "OMPI_COMM_WORLD_RANK",
       "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_SIZE",
       {},
       "mpirun sets all of them"},
      {"Slurm",
       "SLURM_PROCID",
       "SLURM_LOCALID",
       "SLURM_NTASKS",
       nullptr,
       {},
       "srun sets all of them"},
  };
  return *schemes;
}

absl::Status ParseInt(const Scheme& scheme, const char* name,
                      const std::string& text, int* out) {
  if (!absl::SimpleAtoi(text, out) || *out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme.launcher, " launch: ", name, "='", text,
        "' is not a non-negative integer; check how the job was started"));
  }
  return absl::OkStatus();
}

// The error for a scheme whose variables are only partly set, or OK when
// none of them is.
absl::Status IncompleteLaunch(const Scheme& scheme, const EnvLookup& lookup) {
  std::vector<const char*> names = {scheme.rank, scheme.local_rank,
                                    scheme.world_size};
  if (scheme.local_world_size != nullptr) {
    names.push_back(scheme.local_world_size);
  }
  names.insert(names.end(), scheme.also.begin(), scheme.also.end());
  std::vector<std::string> present;
  for (const char* name : names) {
    // SLURM_NTASKS alone is an allocation's shell, not a launch.
    if (std::string_view(name) == "SLURM_NTASKS") continue;
    if (std::optional<std::string> value = lookup(name)) {
      present.push_back(absl::StrCat(name, "=", *value));
    }
  }
  if (present.empty()) return absl::OkStatus();
  std::vector<std::string> missing;
  for (const char* name : {scheme.rank, scheme.world_size}) {
    if (!lookup(name).has_value()) missing.push_back(name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      scheme.launcher, " launch: ", absl::StrJoin(present, ", "),
      present.size() == 1 ? " is" : " are", " set but ",
      absl::StrJoin(missing, " and "), missing.size() == 1 ? " is" : " are",
      " not, so this process cannot know its place in the launched world "
      "(running a private world instead would train the wrong job). ",
      scheme.how,
      ": set the missing ones, or unset the others to run "
      "without a launcher"));
}

}  // namespace

absl::StatusOr<std::optional<LaunchEnv>> DetectLaunchEnv(
    const EnvLookup& lookup) {
  for (const Scheme& scheme : Schemes()) {
    std::optional<std::string> rank = lookup(scheme.rank);
    std::optional<std::string> local_rank = lookup(scheme.local_rank);
    std::optional<std::string> world_size = lookup(scheme.world_size);
    if (!rank || !world_size) continue;
    LaunchEnv env;
    env.launcher = scheme.launcher;
    absl::Status s = ParseInt(scheme, scheme.rank, *rank, &env.rank);
    if (s.ok())
      s = ParseInt(scheme, scheme.world_size, *world_size, &env.world_size);
    // A process started by hand without LOCAL_RANK: all on one node.
    env.local_rank = env.rank;
    if (s.ok() && local_rank)
      s = ParseInt(scheme, scheme.local_rank, *local_rank, &env.local_rank);
    if (s.ok() && scheme.local_world_size != nullptr) {
      if (std::optional<std::string> local = lookup(scheme.local_world_size)) {
        s = ParseInt(scheme, scheme.local_world_size, *local,
                     &env.local_world_size);
      }
    }
    if (s.ok() && env.launcher == "torchrun") {
      env.master_addr = lookup("MASTER_ADDR").value_or("");
      if (std::optional<std::string> port = lookup("MASTER_PORT")) {
        s = ParseInt(scheme, "MASTER_PORT", *port, &env.master_port);
        if (s.ok() && env.master_port > 65535) {
          s = absl::InvalidArgumentError(
              absl::StrCat("torchrun launch: MASTER_PORT=", env.master_port,
                           " is not a port (1 to 65535)"));
        }
      }
    }
    if (!s.ok()) return s;
    if (env.world_size < 1 || env.rank >= env.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          scheme.launcher, " launch: ", scheme.rank, "=", env.rank,
          " is outside [0, ", scheme.world_size, "=", env.world_size, ")"));
    }
    return std::optional<LaunchEnv>(env);
  }
  for (const Scheme& scheme : Schemes()) {
    if (absl::Status s = IncompleteLaunch(scheme, lookup); !s.ok()) return s;
  }
  return std::optional<LaunchEnv>();
}

absl::StatusOr<std::optional<LaunchEnv>> DetectLaunchEnv() {
  return DetectLaunchEnv([](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace tandem::comm
