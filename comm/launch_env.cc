#include "comm/launch_env.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem::comm {
namespace {

struct Scheme {
  const char* launcher;
  const char* rank;
  const char* local_rank;
  const char* world_size;
  const char* local_world_size;  // optional
};

constexpr Scheme kSchemes[] = {
    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},
    {"OpenMPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", nullptr},
};

absl::Status ParseInt(const Scheme& scheme, const char* name,
                      const std::string& text, int* out) {
  if (!absl::SimpleAtoi(text, out) || *out < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme.launcher, " launch: ", name, "='", text,
        "' is not a non-negative integer; check how the job was started"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<LaunchEnv>> DetectLaunchEnv(
    const EnvLookup& lookup) {
  for (const Scheme& scheme : kSchemes) {
    std::optional<std::string> rank = lookup(scheme.rank);
    std::optional<std::string> local_rank = lookup(scheme.local_rank);
    std::optional<std::string> world_size = lookup(scheme.world_size);
    if (!rank || !local_rank || !world_size) continue;
    LaunchEnv env;
    env.launcher = scheme.launcher;
    absl::Status s = ParseInt(scheme, scheme.rank, *rank, &env.rank);
    if (s.ok())
      s = ParseInt(scheme, scheme.local_rank, *local_rank, &env.local_rank);
    if (s.ok())
      s = ParseInt(scheme, scheme.world_size, *world_size, &env.world_size);
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
