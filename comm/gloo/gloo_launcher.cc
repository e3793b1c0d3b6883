#include "comm/gloo/gloo_launcher.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem::comm {
namespace {

std::optional<std::string> GetEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace

GlooLauncher::GlooLauncher(absl::Duration timeout)
    : GlooLauncher(timeout, GetEnv) {}

GlooLauncher::GlooLauncher(absl::Duration timeout, const EnvLookup& lookup)
    : timeout_(timeout) {
  absl::StatusOr<std::optional<LaunchEnv>> env = DetectLaunchEnv(lookup);
  if (!env.ok()) {
    env_status_ = env.status();
    return;
  }
  const std::string how =
      "start it with tandemrun --nproc_per_node=N -- PROGRAM (or torchrun)";
  if (!env->has_value() || (*env)->launcher != "torchrun") {
    env_status_ = absl::FailedPreconditionError(absl::StrCat(
        "gloo needs a torchrun-style launch (RANK, WORLD_SIZE, MASTER_ADDR, "
        "MASTER_PORT) and this process has ",
        env->has_value() ? absl::StrCat("a ", (*env)->launcher, " one")
                         : std::string("none"),
        "; ", how));
    return;
  }
  rank_ = (*env)->rank;
  world_size_ = (*env)->world_size;
  std::optional<std::string> addr = lookup("MASTER_ADDR");
  std::optional<std::string> port = lookup("MASTER_PORT");
  if (!addr || !port || !absl::SimpleAtoi(*port, &master_port_) ||
      master_port_ < 1 || master_port_ > 65535) {
    env_status_ = absl::FailedPreconditionError(absl::StrCat(
        "gloo: MASTER_ADDR and MASTER_PORT (a port in [1, 65535]) must be set "
        "(found MASTER_ADDR=",
        addr.value_or("<unset>"), " MASTER_PORT=", port.value_or("<unset>"),
        "); ", how));
    return;
  }
  master_addr_ = *addr;
  agent_store_ = lookup("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
}

absl::Status GlooLauncher::CanRun(int world_size) const {
  if (!env_status_.ok()) return env_status_;
  if (world_size != world_size_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "gloo: the job has WORLD_SIZE=", world_size_, ", not ", world_size,
        "; start it with tandemrun --nproc_per_node=", world_size));
  }
  return absl::OkStatus();
}

absl::Status GlooLauncher::Connect() {
  if (comm_ != nullptr) return absl::OkStatus();
  if (!connect_status_.ok()) return connect_status_;
  absl::StatusOr<LaunchStore> store =
      ConnectLaunchStore({.master_addr = master_addr_,
                          .master_port = master_port_,
                          .rank = rank_,
                          .agent_store = agent_store_},
                         timeout_);
  if (!store.ok()) return connect_status_ = store.status();
  server_ = std::move(store->server);
  client_ = std::move(store->client);
  GlooOptions options;
  options.rank = rank_;
  options.size = world_size_;
  options.store = client_.get();
  options.prefix = absl::StrCat(store->prefix, "tandem/gloo");
  options.timeout = timeout_;
  options.stall_note_interval = stall_note_interval_;
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create(options);
  if (!comm.ok()) return connect_status_ = comm.status();
  comm_ = std::move(*comm);
  return absl::OkStatus();
}

std::vector<RankStatus> GlooLauncher::Run(int world_size, const RankFn& fn) {
  absl::Status s = CanRun(world_size);
  if (s.ok()) s = Connect();
  if (s.ok()) s = fn(rank_, *comm_);
  return {RankStatus{rank_, s}};
}

void GlooLauncher::Shutdown() {
  comm_.reset();
  client_.reset();
  // Rank 0's store goes last; other ranks no longer need it once connected.
  server_.reset();
}

}  // namespace tandem::comm
