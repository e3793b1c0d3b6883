// How the tandemrun agents of one job (one per node) act as one, through
// the job's TCP store (hosted by node 0's agent for the whole job): they
// start each attempt together, a failure on any node stops the workers of
// every node, and they restart (or give up) together, so every node counts
// the same restarts. torchrun's elastic agents do the same through their
// rendezvous store.
//
//   absl::StatusOr<std::unique_ptr<AgentSync>> sync = AgentSync::Connect(
//       {.host = "10.0.0.1", .port = 29500, .node_rank = 1, .nnodes = 2,
//        .config = "nproc_per_node=8 max_restarts=3"});
//   TANDEM_RETURN_IF_ERROR((*sync)->StartAttempt(0));
//   ... while workers run: (*sync)->PostedFailure(0) ...
//   ... a local failure:   (*sync)->PostFailure(0, "node 1: rank 9 ...") ...
//   ... all local workers exited 0: (*sync)->FinishAttempt(0) ...
//   (*sync)->Leave();
//
// Keys (beside the workers' "/worker/attempt_<k>/..."):
//   /agent/config/<node>            each agent's `config`, compared at Connect
//   /agent/config_read              Connect's last rendezvous: every node has
//                                   read every config (so none loses the
//                                   store before it knows the verdict)
//   /agent/attempt_<k>/arrived/<node>   StartAttempt's rendezvous
//   /agent/attempt_<k>/failed       what failed first (set by PostFailure)
//   /agent/attempt_<k>/succeeded    how many nodes' workers all exited 0
//   /agent/stopped                  why the job stops for good (PostStop)
//   /agent/left                     how many agents are done with the store
//
// Blocking calls are bounded by `rdzv_timeout` (joining) or `timeout`, say
// every `stall_note_interval` what they wait for, and end early on a signal
// (`interrupted`). Not thread-safe; one agent thread uses it.
#ifndef TANDEM_TRAIN_LAUNCH_AGENT_SYNC_H_
#define TANDEM_TRAIN_LAUNCH_AGENT_SYNC_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"

namespace tandem::train {

struct AgentSyncOptions {
  std::string host = "127.0.0.1";  // MASTER_ADDR
  int port = 0;                    // MASTER_PORT
  int node_rank = 0;
  int nnodes = 1;
  // What every node must agree on (its flags); nodes that differ fail at
  // Connect, naming the two configurations.
  std::string config;
  // Bounds how long a node whose workers succeeded waits for the others to
  // finish theirs, and node 0's wait for the others to leave.
  absl::Duration timeout = absl::Seconds(300);
  // Bounds joining (tandemrun's --rdzv_timeout): reaching node 0's store,
  // the config rendezvous of Connect, and StartAttempt's.
  absl::Duration rdzv_timeout = absl::Seconds(300);
  // While a wait is stuck, a line on stderr every interval: who is missing,
  // since when, and when the wait gives up (at least one before it does).
  // Zero: none.
  absl::Duration stall_note_interval = absl::Seconds(30);
  // Polled (every 100 ms) while waiting: a non-zero signal number ends the
  // wait with Cancelled ("stopped by signal 15 while waiting for ...").
  std::function<int()> interrupted = {};
};

class AgentSync {
 public:
  // Connects to the job's store (retrying while node 0 has not started it)
  // and checks that every node's config is the same. FailedPrecondition
  // naming the first node that differs from node 0; DeadlineExceeded naming
  // the nodes that never came (or node 0's store, never reached);
  // Cancelled when `interrupted` said so.
  static absl::StatusOr<std::unique_ptr<AgentSync>> Connect(
      const AgentSyncOptions& options);

  // Blocks until every node's agent has started attempt `attempt`.
  absl::Status StartAttempt(int attempt);

  // This node's attempt failed: every node should stop its workers. `why`
  // ("node 1: rank 9 failed (exit code 1)") is what the others report. The
  // first post of an attempt is kept.
  absl::Status PostFailure(int attempt, const std::string& why);

  // What another node (or this one) posted for `attempt`, if anything.
  // Non-blocking (one store round trip).
  absl::StatusOr<std::optional<std::string>> PostedFailure(int attempt);

  // This node was told to stop (a signal forwarded to tandemrun): the job
  // ends on every node, with no restart. Post it before PostFailure, so a
  // node that sees the failure also sees that it must not restart.
  absl::Status PostStop(const std::string& why);

  // Why the job was stopped for good (PostStop on any node), if it was.
  // Non-blocking (one store round trip, two when stopped).
  absl::StatusOr<std::optional<std::string>> Stopped();

  // Every worker of this node exited 0: waits until every node reports the
  // same (nullopt) or one posts a failure (returned: the job must stop or
  // restart like any failure). DeadlineExceeded after `timeout`.
  absl::StatusOr<std::optional<std::string>> FinishAttempt(int attempt);

  // Done with the store. Node 0 (whose process hosts it) waits, up to
  // `timeout`, for every other agent to leave first, so none loses the
  // store while it still reads the outcome.
  absl::Status Leave();

 private:
  AgentSync(AgentSyncOptions options,
            std::unique_ptr<comm::TcpStoreClient> client);
  std::string AttemptKey(int attempt, const char* what) const;
  // Sets "<prefix>/arrived/<node>" and waits for every node's, up to
  // `timeout`, with stall notes; `doing` says what for.
  absl::Status ArriveAndWait(const std::string& prefix,
                             const std::string& doing, absl::Duration timeout);
  // The value of `key` if some agent set it (`what` names it in errors).
  absl::StatusOr<std::optional<std::string>> ReadIfSet(const std::string& key,
                                                       const char* what);

  const AgentSyncOptions options_;
  std::unique_ptr<comm::TcpStoreClient> client_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_AGENT_SYNC_H_
