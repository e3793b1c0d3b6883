// The store of a torchrun-style job, as each worker reaches it: tandemrun (or
// torchrun's agent) hosts it and says so with TORCHELASTIC_USE_AGENT_STORE=
// True; otherwise rank 0 hosts it at MASTER_PORT, as c10d's
// init_process_group does. Every rank then connects a client.
//
// An agent's store outlives the workers: it serves every attempt of a job
// restarted after a failure (and the agents' own coordination across
// nodes). So, as PyTorch's workers do (torch.distributed.rendezvous wraps
// the agent store in PrefixStore("/worker/attempt_<k>")), workers put their
// keys under LaunchStore::prefix = "/worker/attempt_<k>/", k being
// TORCHELASTIC_RESTART_COUNT: keys of a failed attempt never satisfy the
// next attempt's rendezvous. A store of rank 0's lives one attempt: no
// prefix.
//
//   absl::StatusOr<LaunchStore> store = ConnectLaunchStore(
//       {.master_addr = "127.0.0.1", .master_port = 29500, .rank = 0,
//        .agent_store = false}, absl::Seconds(300));
//   (*store)->client->Set(...);
//
// Blocking: connecting retries until `timeout` (the host may start later).
#ifndef TANDEM_COMM_STORE_LAUNCH_STORE_H_
#define TANDEM_COMM_STORE_LAUNCH_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"

namespace tandem::comm {

struct LaunchStoreAddress {
  std::string master_addr;
  int master_port = 0;
  int rank = 0;
  bool agent_store = false;  // the launcher hosts the store
};

struct LaunchStore {
  // Rank 0's server when no agent hosts the store; destroy it last.
  std::unique_ptr<TcpStoreServer> server;
  std::unique_ptr<TcpStoreClient> client;
  // Starts every key of this attempt ("" or "/worker/attempt_<k>/").
  std::string prefix;
};

// Reads TORCHELASTIC_USE_AGENT_STORE (getenv).
bool AgentHostsStore();

// The key prefix of this attempt's workers in an agent's store:
// "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>/" (getenv; 0 when unset).
// InvalidArgument naming the variable when it is not a count >= 0.
absl::StatusOr<std::string> AgentStorePrefix();

absl::StatusOr<LaunchStore> ConnectLaunchStore(const LaunchStoreAddress& at,
                                               absl::Duration timeout);

}  // namespace tandem::comm

#endif  // TANDEM_COMM_STORE_LAUNCH_STORE_H_
