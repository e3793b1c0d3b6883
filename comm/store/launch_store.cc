#include "comm/store/launch_store.h"

#include <cstdlib>
#include <string>

namespace tandem::comm {

bool AgentHostsStore() {
  const char* v = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return v != nullptr && std::string(v) == "True";
}

absl::StatusOr<LaunchStore> ConnectLaunchStore(const LaunchStoreAddress& at,
                                               absl::Duration timeout) {
  LaunchStore store;
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
