#include "comm/store/launch_store.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tandem::comm {

bool AgentHostsStore() {
  const char* v = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return v != nullptr && std::string(v) == "True";
}

absl::StatusOr<std::string> AgentStorePrefix() {
  const char* v = std::getenv("TORCHELASTIC_RESTART_COUNT");
  int64_t attempt = 0;
  if (v != nullptr && !(absl::SimpleAtoi(v, &attempt) && attempt >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TORCHELASTIC_RESTART_COUNT='", v,
        "' is not a count >= 0; it is set by tandemrun or torchrun, not by "
        "hand"));
  }
  return absl::StrCat("/worker/attempt_", attempt, "/");
}

absl::StatusOr<LaunchStore> ConnectLaunchStore(const LaunchStoreAddress& at,
                                               absl::Duration timeout) {
  LaunchStore store;
  if (at.agent_store) {
    absl::StatusOr<std::string> prefix = AgentStorePrefix();
    if (!prefix.ok()) return prefix.status();
    store.prefix = *std::move(prefix);
  }
  if (at.rank == 0 && !at.agent_store) {
    absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
        TcpStoreServer::Start({.bind_address = "", .port = at.master_port});
    if (!server.ok()) return server.status();
    store.server = std::move(*server);
  }
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect(
          {.host = at.master_addr, .port = at.master_port, .timeout = timeout});
  if (!client.ok()) return client.status();
  store.client = std::move(*client);
  return store;
}

}  // namespace tandem::comm
