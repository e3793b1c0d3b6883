#include "train/launch/agent_sync.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/store/rendezvous.h"
#include "comm/store/tcp_store.h"

namespace tandem::train {
namespace {

// How often a waiting agent looks at the store again.
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);

absl::Status Annotate(const absl::Status& s, int node,
                      const std::string& doing) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("tandemrun (node ", node,
                                             "): ", doing, ": ", s.message()));
}

}  // namespace

AgentSync::AgentSync(AgentSyncOptions options,
                     std::unique_ptr<comm::TcpStoreClient> client)
    : options_(std::move(options)), client_(std::move(client)) {}

absl::StatusOr<std::unique_ptr<AgentSync>> AgentSync::Connect(
    const AgentSyncOptions& options) {
  const int node = options.node_rank;
  absl::StatusOr<std::unique_ptr<comm::TcpStoreClient>> client =
      comm::TcpStoreClient::Connect({.host = options.host,
                                     .port = options.port,
                                     .timeout = options.timeout});
  if (!client.ok()) {
    return Annotate(client.status(), node,
                    "reaching the job's store on node 0");
  }
  std::unique_ptr<AgentSync> sync(new AgentSync(options, *std::move(client)));
  comm::TcpStoreClient& c = *sync->client_;
  const std::string doing = "comparing the nodes' tandemrun flags";
  absl::Status s = c.Set(absl::StrCat("/agent/config/", node), options.config);
  if (s.ok()) {
    s = comm::ArriveAndWait(c, "/agent/config", node, options.nnodes);
  }
  if (!s.ok()) return Annotate(s, node, doing);
  absl::Status agreed;
  for (int other = 0; other < options.nnodes && agreed.ok(); ++other) {
    absl::StatusOr<std::string> theirs =
        c.Get(absl::StrCat("/agent/config/", other));
    if (!theirs.ok()) return Annotate(theirs.status(), node, doing);
    if (*theirs != options.config) {
      agreed = absl::FailedPreconditionError(absl::StrCat(
          "tandemrun (node ", node, "): node ", other, " runs with '", *theirs,
          "' but node ", node, " with '", options.config,
          "'; start every node's tandemrun with the same flags (only "
          "--node_rank differs)"));
    }
  }
  // Every node has read every config before any leaves: node 0's store
  // must outlive the others' reads, or a node that differs would learn of
  // it as a lost connection.
  s = comm::ArriveAndWait(c, "/agent/config_read", node, options.nnodes);
  if (!agreed.ok()) return agreed;
  if (!s.ok()) return Annotate(s, node, doing);
  return sync;
}

std::string AgentSync::AttemptKey(int attempt, const char* what) const {
  return absl::StrCat("/agent/attempt_", attempt, "/", what);
}

absl::Status AgentSync::StartAttempt(int attempt) {
  return Annotate(
      comm::ArriveAndWait(*client_, AttemptKey(attempt, "start"),
                          options_.node_rank, options_.nnodes),
      options_.node_rank,
      absl::StrCat("waiting for every node to start attempt ", attempt));
}

absl::Status AgentSync::PostFailure(int attempt, const std::string& why) {
  absl::StatusOr<int64_t> n = client_->Add(AttemptKey(attempt, "failures"), 1);
  if (!n.ok()) {
    return Annotate(n.status(), options_.node_rank, "posting a failure");
  }
  if (*n != 1) return absl::OkStatus();  // another node's came first
  return Annotate(client_->Set(AttemptKey(attempt, "failed"), why),
                  options_.node_rank, "posting a failure");
}

absl::StatusOr<std::optional<std::string>> AgentSync::ReadIfSet(
    const std::string& key, const char* what) {
  absl::StatusOr<bool> there = client_->Check({key});
  if (!there.ok()) {
    return Annotate(there.status(), options_.node_rank,
                    absl::StrCat("checking for ", what));
  }
  if (!*there) return std::nullopt;
  absl::StatusOr<std::string> value = client_->Get(key);
  if (!value.ok()) {
    return Annotate(value.status(), options_.node_rank,
                    absl::StrCat("reading ", what));
  }
  return *std::move(value);
}

absl::StatusOr<std::optional<std::string>> AgentSync::PostedFailure(
    int attempt) {
  return ReadIfSet(AttemptKey(attempt, "failed"), "another node's failure");
}

namespace {
constexpr char kStoppedKey[] = "/agent/stopped";
}  // namespace

absl::Status AgentSync::PostStop(const std::string& why) {
  return Annotate(client_->Set(kStoppedKey, why), options_.node_rank,
                  "posting that the job stops");
}

absl::StatusOr<std::optional<std::string>> AgentSync::Stopped() {
  return ReadIfSet(kStoppedKey, "why the job was stopped");
}

absl::StatusOr<std::optional<std::string>> AgentSync::FinishAttempt(
    int attempt) {
  const std::string doing =
      absl::StrCat("waiting for the other nodes to finish attempt ", attempt);
  const std::string key = AttemptKey(attempt, "succeeded");
  absl::StatusOr<int64_t> done = client_->Add(key, 1);
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (done.ok()) {
    absl::StatusOr<std::optional<std::string>> failed = PostedFailure(attempt);
    if (!failed.ok()) return failed.status();
    if (failed->has_value()) return failed;
    if (*done >= options_.nnodes) return std::nullopt;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "tandemrun (node ", options_.node_rank, "): ", doing, ": ", *done,
          " of ", options_.nnodes, " nodes finished within ",
          absl::FormatDuration(options_.timeout),
          "; check the other nodes' tandemrun output"));
    }
    absl::SleepFor(kPollInterval);
    done = client_->Add(key, 0);
  }
  return Annotate(done.status(), options_.node_rank, doing);
}

absl::Status AgentSync::Leave() {
  absl::StatusOr<int64_t> left = client_->Add("/agent/left", 1);
  if (options_.node_rank != 0) {
    return Annotate(left.status(), options_.node_rank, "leaving the job");
  }
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (left.ok() && *left < options_.nnodes) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "tandemrun (node 0): ", options_.nnodes - *left,
          " other node(s) did not finish with the job's store within ",
          absl::FormatDuration(options_.timeout), "; stopping it anyway"));
    }
    absl::SleepFor(kPollInterval);
    left = client_->Add("/agent/left", 0);
  }
  return Annotate(left.status(), 0, "leaving the job");
}

}  // namespace tandem::train
