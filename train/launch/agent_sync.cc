#include "train/launch/agent_sync.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/stall_note.h"
#include "comm/store/tcp_store.h"

namespace tandem::train {
namespace {

// How often a waiting agent looks at the store again (and at signals).
constexpr absl::Duration kPollInterval = absl::Milliseconds(50);
constexpr absl::Duration kWaitSlice = absl::Milliseconds(100);

absl::Status Annotate(const absl::Status& s, int node,
                      const std::string& doing) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("tandemrun (node ", node,
                                             "): ", doing, ": ", s.message()));
}

std::string Clock(absl::Time t) {
  return absl::FormatTime("%H:%M:%S UTC", t, absl::UTCTimeZone());
}

// One bounded wait of an agent: its deadline, its stall notes, its signal.
class BoundedWait {
 public:
  // `doing`: what the wait is for; `limit`: the flag that bounds it.
  BoundedWait(const AgentSyncOptions& o, std::string doing,
              absl::Duration timeout, std::string limit)
      : o_(o),
        doing_(std::move(doing)),
        limit_(std::move(limit)),
        timeout_(timeout),
        start_(absl::Now()),
        deadline_(start_ + timeout),
        next_note_(start_ + o.stall_note_interval) {}

  bool Expired() const { return absl::Now() >= deadline_; }
  // How long the next blocking step may take.
  absl::Duration Slice() const {
    return std::clamp(deadline_ - absl::Now(), absl::Milliseconds(1),
                      kWaitSlice);
  }

  // Cancelled when a signal came, naming what the wait was for.
  absl::Status Interrupted() const {
    const int sig = o_.interrupted ? o_.interrupted() : 0;
    if (sig == 0) return absl::OkStatus();
    return absl::CancelledError(
        absl::StrCat("tandemrun (node ", o_.node_rank, "): stopped by signal ",
                     sig, " (", strsignal(sig), ") while ", doing_));
  }

  // Prints the stall note when one is due (always once before giving up);
  // `missing` names who is waited for.
  void Note(const std::function<std::string()>& missing) {
    if (o_.stall_note_interval <= absl::ZeroDuration()) return;
    const absl::Time now = absl::Now();
    if (now < next_note_ && !(now >= deadline_ && !noted_)) return;
    noted_ = true;
    next_note_ = now + o_.stall_note_interval;
    const std::string line =
        absl::StrCat("tandemrun (node ", o_.node_rank, "): still ", doing_,
                     ": waiting for ", missing(), " since ", Clock(start_),
                     " (", absl::ToInt64Seconds(now - start_), "s",
                     "); giving up at ", Clock(deadline_), " (", limit_, ")\n");
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }

  // DeadlineExceeded: `missing` did not come within the limit; `fix`: what
  // to do.
  absl::Status GiveUp(const std::string& missing, const std::string& fix) {
    return absl::DeadlineExceededError(
        absl::StrCat("tandemrun (node ", o_.node_rank, "): ", doing_, ": ",
                     missing, " did not come within ",
                     absl::FormatDuration(timeout_), " (", limit_, "); ", fix));
  }

 private:
  const AgentSyncOptions& o_;
  const std::string doing_;
  const std::string limit_;
  const absl::Duration timeout_;
  const absl::Time start_;
  const absl::Time deadline_;
  absl::Time next_note_;
  bool noted_ = false;
};

std::string RdzvLimit(const AgentSyncOptions& o) {
  return absl::StrCat("--rdzv_timeout=", absl::ToDoubleSeconds(o.rdzv_timeout));
}

}  // namespace

AgentSync::AgentSync(AgentSyncOptions options,
                     std::unique_ptr<comm::TcpStoreClient> client)
    : options_(std::move(options)), client_(std::move(client)) {}

absl::StatusOr<std::unique_ptr<AgentSync>> AgentSync::Connect(
    const AgentSyncOptions& options) {
  const int node = options.node_rank;
  const std::string address = absl::StrCat(options.host, ":", options.port);
  // Node 0's store may start later: retry in short slices, so the wait
  // speaks and a signal ends it.
  BoundedWait reach(
      options, absl::StrCat("reaching the job's store on node 0 at ", address),
      options.rdzv_timeout, RdzvLimit(options));
  while (true) {
    if (absl::Status s = reach.Interrupted(); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<comm::TcpStoreClient>> probe =
        comm::TcpStoreClient::Connect(
            {.host = options.host,
             .port = options.port,
             .timeout = std::max(reach.Slice(), absl::Milliseconds(500))});
    if (probe.ok()) break;
    if (!absl::IsDeadlineExceeded(probe.status())) {
      return Annotate(probe.status(), node,
                      "reaching the job's store on node 0");
    }
    reach.Note([] { return std::string("node 0 (it hosts the store)"); });
    if (reach.Expired()) {
      return reach.GiveUp(
          "node 0's store",
          absl::StrCat("start node 0's tandemrun (--node_rank=0) with the "
                       "same --nnodes, or check --master_addr and "
                       "--master_port (",
                       address, ")"));
    }
  }
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
  if (!s.ok()) return Annotate(s, node, doing);
  s = sync->ArriveAndWait("/agent/config", "joining the job",
                          options.rdzv_timeout);
  if (!s.ok()) return s;
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
  s = sync->ArriveAndWait("/agent/config_read", doing, options.rdzv_timeout);
  if (!agreed.ok()) return agreed;
  if (!s.ok()) return s;
  return sync;
}

absl::Status AgentSync::ArriveAndWait(const std::string& prefix,
                                      const std::string& doing,
                                      absl::Duration timeout) {
  const int node = options_.node_rank;
  const std::string base = absl::StrCat(prefix, "/arrived/");
  if (absl::Status s = client_->Set(absl::StrCat(base, node), "1"); !s.ok()) {
    return Annotate(s, node, doing);
  }
  std::vector<std::string> keys;
  for (int n = 0; n < options_.nnodes; ++n) {
    keys.push_back(absl::StrCat(base, n));
  }
  const auto missing = [&]() -> std::string {
    std::vector<int64_t> absent;
    for (int n = 0; n < options_.nnodes; ++n) {
      absl::StatusOr<bool> here = client_->Check({keys[n]});
      if (here.ok() && !*here) absent.push_back(n);
    }
    if (absent.empty()) return "the last node";
    return absl::StrCat(comm::NameMembers("node", absent),
                        " of --nnodes=", options_.nnodes);
  };
  BoundedWait wait(options_, doing, timeout, RdzvLimit(options_));
  while (true) {
    if (absl::Status s = wait.Interrupted(); !s.ok()) return s;
    absl::Status s = client_->Wait(keys, wait.Slice());
    if (s.ok()) return s;
    if (!absl::IsDeadlineExceeded(s)) return Annotate(s, node, doing);
    wait.Note(missing);
    if (wait.Expired()) {
      return wait.GiveUp(
          missing(),
          absl::StrCat("start every node's tandemrun (--node_rank=0 to ",
                       options_.nnodes - 1,
                       ") with the same --nnodes, --master_addr and "
                       "--master_port, and check that each can reach node "
                       "0's port ",
                       options_.port));
    }
  }
}

std::string AgentSync::AttemptKey(int attempt, const char* what) const {
  return absl::StrCat("/agent/attempt_", attempt, "/", what);
}

absl::Status AgentSync::StartAttempt(int attempt) {
  return ArriveAndWait(AttemptKey(attempt, "start"),
                       absl::StrCat("starting attempt ", attempt),
                       options_.rdzv_timeout);
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
  BoundedWait wait(options_,
                   absl::StrCat("finishing attempt ", attempt,
                                " (this node's workers succeeded)"),
                   options_.timeout, "the agents' timeout");
  while (done.ok()) {
    absl::StatusOr<std::optional<std::string>> failed = PostedFailure(attempt);
    if (!failed.ok()) return failed.status();
    if (failed->has_value()) return failed;
    if (*done >= options_.nnodes) return std::nullopt;
    if (absl::Status s = wait.Interrupted(); !s.ok()) return s;
    const auto others = [&] {
      return absl::StrCat(options_.nnodes - *done, " of ", options_.nnodes,
                          " nodes");
    };
    wait.Note(others);
    if (wait.Expired()) {
      return wait.GiveUp(others(), "check the other nodes' tandemrun output");
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
  BoundedWait wait(options_, "keeping the job's store up for the others",
                   options_.timeout, "the agents' timeout");
  while (left.ok() && *left < options_.nnodes) {
    const auto others = [&] {
      return absl::StrCat(options_.nnodes - *left, " other node(s)");
    };
    wait.Note(others);
    if (wait.Expired()) {
      return wait.GiveUp(others(), "stopping the store anyway");
    }
    absl::SleepFor(kPollInterval);
    left = client_->Add("/agent/left", 0);
  }
  return Annotate(left.status(), 0, "leaving the job");
}

}  // namespace tandem::train
