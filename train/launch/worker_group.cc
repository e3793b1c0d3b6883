#include "train/launch/worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/std_streams.h"
#include "comm/store/tcp_store.h"
#include "train/launch/agent_sync.h"
#include "train/launch/line_forwarder.h"
#include "train/launch/worker_process.h"

extern char** environ;

// GCC 12 at -O2 reports copies of WorkerGroupResult::failure (a
// std::optional<WorkerFailure>, every field initialised) as "may be used
// uninitialized": a false positive of its std::optional analysis that turns
// -c opt into a failed build under -Werror. Silenced for this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace tandem::train {
namespace {

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;   // also its process group's id
  int err_fd = -1;  // read end of its stderr pipe; -1 once at EOF
  std::unique_ptr<LineForwarder> err;  // its stderr, forwarded and kept
  bool running = false;
  int wait_status = 0;
};

// Why the live process `pid` cannot run, from /proc/<pid>/stat's state
// ("stopped (SIGSTOP or SIGTSTP)"), or "" when it can (or cannot be read).
std::string NotRunningReason(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return "";
  // "pid (comm) S ...": comm may hold spaces and parentheses.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return "";
  switch (line[close + 2]) {
    case 'T':
      return "stopped (SIGSTOP or SIGTSTP: kill -CONT resumes it)";
    case 't':
      return "stopped by a debugger (tracing stop)";
    case 'Z':
      return "a zombie";
    default:
      return "";
  }
}

// Reads what is there on w's stderr pipe and forwards it.
void Drain(Worker& w) {
  if (w.err_fd < 0) return;
  char buf[65536];
  while (true) {
    ssize_t n = read(w.err_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // EOF or a broken pipe: end the unfinished line
      w.err->Finish();
      close(w.err_fd);
      w.err_fd = -1;
      return;
    }
    w.err->Feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

std::vector<std::string> WorkerEnv(const WorkerGroupOptions& o, int port,
                                   const Worker& w, int restart) {
  std::map<std::string, std::string> set = {
      {"RANK", absl::StrCat(w.rank)},
      {"LOCAL_RANK", absl::StrCat(w.local_rank)},
      {"WORLD_SIZE", absl::StrCat(o.nnodes * o.nproc_per_node)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(o.nproc_per_node)},
      {"GROUP_RANK", absl::StrCat(o.node_rank)},
      {"ROLE_RANK", absl::StrCat(w.rank)},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", absl::StrCat(port)},
      {"TORCHELASTIC_RESTART_COUNT", absl::StrCat(restart)},
      {"TORCHELASTIC_MAX_RESTARTS", absl::StrCat(o.max_restarts)},
  };
  // Node 0's agent hosts the store for every node's workers (so no rank 0
  // hosts one), and their keys go under the attempt's prefix everywhere.
  set["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (set.count(name) == 0) {
      env.emplace_back(entry);
    }
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

absl::Status Spawn(const WorkerGroupOptions& o, int port, int restart,
                   Worker& w) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "tandemrun: pipe() for rank ", w.rank, ": ", std::strerror(errno)));
  }
  absl::StatusOr<pid_t> pid = SpawnInOwnGroup(
      o.command, WorkerEnv(o, port, w, restart), fds[1], w.rank);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  w.pid = *pid;
  w.err_fd = fds[0];
  w.err = std::make_unique<LineForwarder>(STDERR_FILENO,
                                          std::max(o.stderr_tail_lines, 1));
  w.running = true;
  return absl::OkStatus();
}

struct AttemptOutcome {
  std::optional<WorkerFailure> failure;
  int signal = 0;  // a forwarded signal ended the attempt
  // Another node's failure stopped this node's workers (multi-node jobs).
  std::optional<std::string> remote_failure;
};

// What Watch asks of the other nodes (multi-node jobs; unset otherwise).
struct NodeLink {
  // Another node's failure, if one was posted. Called every kRemotePoll.
  std::function<std::optional<std::string>()> posted_failure;
  // Tells the other nodes that this node's worker failed.
  std::function<void(const WorkerFailure&)> post_failure;
};

constexpr absl::Duration kRemotePoll = absl::Milliseconds(100);

// Signals every worker's whole process group (what it started too).
void SignalAll(std::vector<Worker>& workers, int sig) {
  for (Worker& w : workers) {
    if (w.running) SignalGroup(w.pid, sig);
  }
}

// Ends what the workers left behind in their groups (SIGTERM, then SIGKILL
// after the grace period): nothing of an attempt outlives it.
void EndLeftovers(std::vector<Worker>& workers, const WorkerGroupOptions& o,
                  Watchdog* watchdog) {
  std::vector<pid_t> groups;
  for (const Worker& w : workers) {
    if (w.pid > 0) groups.push_back(w.pid);
  }
  EndGroups(groups, o.stop_grace);
  if (watchdog != nullptr) {
    for (pid_t g : groups) watchdog->Remove(g);
  }
}

// Watches one attempt's workers until all have exited and their stderr is
// drained.
AttemptOutcome Watch(std::vector<Worker>& workers, const WorkerGroupOptions& o,
                     const NodeLink& link) {
  AttemptOutcome outcome;
  std::optional<absl::Time> kill_at;  // set once we stop the workers
  absl::Time next_remote_poll = absl::Now();
  int failed_index = -1;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Worker*> owners;
    for (Worker& w : workers) {
      if (w.err_fd >= 0) {
        fds.push_back({w.err_fd, POLLIN, 0});
        owners.push_back(&w);
      }
    }
    if (o.signal_fd >= 0) fds.push_back({o.signal_fd, POLLIN, 0});
    bool any_running = false;
    for (const Worker& w : workers) any_running = any_running || w.running;
    if (!any_running) {
      // Everyone exited: take what is left in the pipes (a grandchild that
      // keeps one open must not hold us up) and stop.
      for (Worker& w : workers) {
        Drain(w);
        if (w.err_fd >= 0) {
          close(w.err_fd);
          w.err_fd = -1;
        }
      }
      break;
    }
    poll(fds.data(), fds.size(), 50);
    for (size_t i = 0; i < owners.size(); ++i) {
      if (fds[i].revents != 0) Drain(*owners[i]);
    }
    if (o.signal_fd >= 0 && (fds.back().revents & POLLIN)) {
      unsigned char sig = 0;
      if (read(o.signal_fd, &sig, 1) == 1 && sig != 0) {
        SignalAll(workers, sig);
        if (outcome.signal == 0) outcome.signal = sig;
        if (!kill_at) kill_at = absl::Now() + o.stop_grace;
      }
    }
    for (size_t i = 0; i < workers.size(); ++i) {
      Worker& w = workers[i];
      if (!w.running) continue;
      // Reaps the worker and whatever of its group came back to us.
      const std::optional<int> reaped = ReapGroup(w.pid, w.pid);
      if (!reaped) continue;
      const int status = *reaped;
      w.running = false;
      w.wait_status = status;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && failed_index < 0 && outcome.signal == 0 && !kill_at) {
        failed_index = static_cast<int>(i);
        WorkerFailure f;
        f.rank = w.rank;
        f.local_rank = w.local_rank;
        f.pid = w.pid;
        f.time = absl::Now();
        if (WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) f.signal = WTERMSIG(status);
        for (const Worker& peer : workers) {
          if (!peer.running) continue;
          const std::string why = NotRunningReason(peer.pid);
          if (why.empty()) continue;
          f.peers_not_running.push_back(absl::StrCat(
              "rank ", peer.rank, " (local_rank: ", peer.local_rank,
              ", pid: ", peer.pid, "): ", why));
        }
        outcome.failure = f;
        // A worker that dies because a peer on another node died first (a
        // closed connection) is not the cause: keep the cause if it is
        // already known.
        if (link.posted_failure) outcome.remote_failure = link.posted_failure();
        if (link.post_failure) link.post_failure(f);
        SignalAll(workers, SIGTERM);
        kill_at = absl::Now() + o.stop_grace;
      }
    }
    if (link.posted_failure && !kill_at && absl::Now() >= next_remote_poll) {
      next_remote_poll = absl::Now() + kRemotePoll;
      if (std::optional<std::string> why = link.posted_failure()) {
        outcome.remote_failure = std::move(why);
        SignalAll(workers, SIGTERM);
        kill_at = absl::Now() + o.stop_grace;
      }
    }
    if (kill_at && absl::Now() >= *kill_at) {
      SignalAll(workers, SIGKILL);
      kill_at = absl::InfiniteFuture();
    }
  }
  if (outcome.failure) {
    const Worker& w = workers[static_cast<size_t>(failed_index)];
    outcome.failure->stderr_tail = w.err->Tail();
  }
  return outcome;
}

// "rank 9 failed (exit code 1)" / "rank 9 failed (signal 9)".
std::string WhatFailed(const WorkerFailure& f) {
  return absl::StrCat("rank ", f.rank, " failed (",
                      f.signal != 0 ? absl::StrCat("signal ", f.signal)
                                    : absl::StrCat("exit code ", f.exit_code),
                      ")");
}

// One attempt's workers, started, watched and reaped, with nothing of their
// process groups left behind; Unavailable when one cannot be started (the
// others are killed first).
absl::StatusOr<AttemptOutcome> RunAttempt(const WorkerGroupOptions& options,
                                          int port, int attempt,
                                          const NodeLink& link,
                                          Watchdog* watchdog) {
  std::vector<Worker> workers(static_cast<size_t>(options.nproc_per_node));
  absl::Status spawned = absl::OkStatus();
  for (int i = 0; i < options.nproc_per_node && spawned.ok(); ++i) {
    workers[i].local_rank = i;
    workers[i].rank = options.node_rank * options.nproc_per_node + i;
    spawned = Spawn(options, port, attempt, workers[i]);
    if (spawned.ok() && watchdog != nullptr) watchdog->Add(workers[i].pid);
  }
  if (!spawned.ok()) {
    SignalAll(workers, SIGKILL);
    for (Worker& w : workers) {
      if (w.running) waitpid(w.pid, nullptr, 0);
      if (w.err_fd >= 0) close(w.err_fd);
    }
    EndLeftovers(workers, options, watchdog);
    return spawned;
  }
  AttemptOutcome outcome = Watch(workers, options, link);
  EndLeftovers(workers, options, watchdog);
  return outcome;
}

}  // namespace

absl::StatusOr<WorkerGroupResult> RunWorkerGroup(
    const WorkerGroupOptions& options) {
  if (absl::Status s = CheckWorkerGroupOptions(options); !s.ok()) return s;
  WorkerGroupResult result;
  // Workers go with tandemrun, even with a kill -9 of it: orphans of their
  // groups come back to us to be reaped, and the watchdog ends the groups
  // that tandemrun could not (worker_process.h). Started before the store,
  // while this process has no threads of its own.
  BecomeSubreaper();
  absl::StatusOr<std::unique_ptr<Watchdog>> watchdog =
      Watchdog::Start(options.stop_grace, options.nproc_per_node);
  if (!watchdog.ok()) return watchdog.status();
  // One store for the whole job, as torchrun's agent keeps: each attempt's
  // workers put their keys under "/worker/attempt_<k>/"
  // (comm/store/launch_store.h), so keys of a failed attempt never satisfy
  // the next one's rendezvous, and the agents of several nodes coordinate
  // through it (agent_sync.h).
  std::unique_ptr<comm::TcpStoreServer> store;
  int port = options.master_port;
  if (options.node_rank == 0) {
    absl::StatusOr<std::unique_ptr<comm::TcpStoreServer>> started =
        comm::TcpStoreServer::Start({.bind_address = "", .port = port});
    if (!started.ok()) return started.status();
    store = std::move(*started);
    port = store->port();
  }
  result.master_port = port;
  // A signal that comes while the agents wait for each other ends the wait
  // (and the job) at once.
  int pending_signal = 0;
  const auto interrupted = [&]() -> int {
    unsigned char sig = 0;
    pollfd ready = {options.signal_fd, POLLIN, 0};
    if (pending_signal == 0 && options.signal_fd >= 0 &&
        poll(&ready, 1, 0) == 1 && read(options.signal_fd, &sig, 1) == 1) {
      pending_signal = sig;
    }
    return pending_signal;
  };
  const auto stopped_by = [&](const absl::Status& s) {
    return absl::IsCancelled(s) && pending_signal != 0;
  };
  const auto signalled = [&]() -> absl::StatusOr<WorkerGroupResult> {
    result.signal = pending_signal;
    result.exit_code = 128 + pending_signal;
    return result;
  };
  std::unique_ptr<AgentSync> sync;
  NodeLink link;
  int attempt = 0;
  if (options.nnodes > 1) {
    absl::StatusOr<std::unique_ptr<AgentSync>> connected = AgentSync::Connect(
        {.host = options.node_rank == 0 ? "127.0.0.1" : options.master_addr,
         .port = port,
         .node_rank = options.node_rank,
         .nnodes = options.nnodes,
         .config = absl::StrCat(
             "--nnodes=", options.nnodes, " --nproc_per_node=",
             options.nproc_per_node, " --max_restarts=", options.max_restarts,
             options.rdzv_id.empty()
                 ? ""
                 : absl::StrCat(" --rdzv_id=", options.rdzv_id)),
         .timeout = options.agent_timeout,
         .rdzv_timeout = options.rdzv_timeout,
         .stall_note_interval = options.stall_note_interval,
         .interrupted = interrupted});
    if (stopped_by(connected.status())) return signalled();
    if (!connected.ok()) return connected.status();
    sync = std::move(*connected);
    link.posted_failure = [&]() -> std::optional<std::string> {
      absl::StatusOr<std::optional<std::string>> why =
          sync->PostedFailure(attempt);
      // The store is gone (node 0 ended): the job is over for this node.
      if (!why.ok()) return std::string(why.status().message());
      return *why;
    };
    link.post_failure = [&](const WorkerFailure& f) {
      absl::Status posted = sync->PostFailure(
          attempt,
          absl::StrCat("node ", options.node_rank, ": ", WhatFailed(f)));
      if (!posted.ok()) {
        WriteAll(STDERR_FILENO, absl::StrCat(posted.message(), "\n"));
      }
    };
  }
  for (;; ++attempt) {
    if (sync != nullptr) {
      absl::Status s = sync->StartAttempt(attempt);
      if (stopped_by(s)) return signalled();
      if (!s.ok()) return s;
    }
    absl::StatusOr<AttemptOutcome> ran =
        RunAttempt(options, port, attempt, link, watchdog->get());
    if (!ran.ok()) {
      if (sync != nullptr) {
        (void)sync->PostFailure(attempt,
                                absl::StrCat("node ", options.node_rank,
                                             ": could not start its workers"));
      }
      return ran.status();
    }
    AttemptOutcome& outcome = *ran;
    result.restarts = attempt;
    if (sync != nullptr && outcome.signal == 0 && !outcome.failure &&
        !outcome.remote_failure) {
      absl::StatusOr<std::optional<std::string>> others =
          sync->FinishAttempt(attempt);
      if (stopped_by(others.status())) return signalled();
      if (!others.ok()) return others.status();
      outcome.remote_failure = *others;
    }
    if (outcome.signal != 0) {
      if (sync != nullptr) {
        // Stop first: a node that sees the failure must also see that the
        // job does not restart.
        const std::string why =
            absl::StrCat("node ", options.node_rank,
                         ": tandemrun stopped by signal ", outcome.signal);
        (void)sync->PostStop(why);
        (void)sync->PostFailure(attempt, why);
        (void)sync->Leave();
      }
      result.exit_code = 128 + outcome.signal;
      result.signal = outcome.signal;
      result.failure.reset();
      return result;
    }
    if (!outcome.failure && !outcome.remote_failure) {
      result.exit_code = 0;
      result.failure.reset();
      result.remote_failure.reset();
      if (sync != nullptr) {
        if (absl::Status s = sync->Leave(); !s.ok()) {
          WriteAll(STDERR_FILENO, absl::StrCat(s.message(), "\n"));
        }
      }
      return result;
    }
    result.failure = outcome.failure;
    result.remote_failure = outcome.remote_failure;
    if (attempt >= options.max_restarts) {
      result.exit_code = 1;
      if (sync != nullptr) (void)sync->Leave();
      return result;
    }
    // Another node was stopped (a signal, e.g. the scheduler's preemption):
    // the job ends everywhere instead of restarting without that node.
    if (sync != nullptr) {
      absl::StatusOr<std::optional<std::string>> stopped = sync->Stopped();
      if (!stopped.ok() || stopped->has_value()) {
        const std::string why =
            stopped.ok() ? **stopped : std::string(stopped.status().message());
        WriteAll(STDERR_FILENO, absl::StrCat("tandemrun: the job was stopped (",
                                             why, "); not restarting\n"));
        result.exit_code = 1;
        result.stopped = why;
        (void)sync->Leave();
        return result;
      }
    }
    // The cause first: another node's failure, when it was posted before
    // this node's worker died.
    const std::string what = outcome.remote_failure
                                 ? absl::StrCat("another node failed (",
                                                *outcome.remote_failure, ")")
                                 : WhatFailed(*outcome.failure);
    WriteAll(STDERR_FILENO,
             absl::StrCat("tandemrun: ", what, "; restarting all ",
                          options.nproc_per_node, " workers (restart ",
                          attempt + 1, " of ", options.max_restarts, ")\n"));
  }
}

std::string FailureReport(const std::string& program, const WorkerFailure& f) {
  const std::string rule(60, '=');
  const std::string thin(60, '-');
  std::string exit = f.signal != 0
                         ? absl::StrCat("-", f.signal, " (signal ", f.signal,
                                        ": ", strsignal(f.signal), ")")
                         : absl::StrCat(f.exit_code);
  std::string tail = f.stderr_tail.empty()
                         ? "    <no stderr output>"
                         : "    " + absl::StrJoin(f.stderr_tail, "\n    ");
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(
      rule, "\n", program, " FAILED\n", thin,
      "\nRoot Cause (first observed failure):\n[0]:\n", "  time      : ",
      absl::FormatTime("%Y-%m-%d_%H:%M:%S", f.time, absl::UTCTimeZone()),
      "\n  host      : ", host, "\n  rank      : ", f.rank,
      " (local_rank: ", f.local_rank, ")\n  exitcode  : ", exit,
      " (pid: ", f.pid, ")\n  stderr (last lines):\n", tail, "\n",
      f.peers_not_running.empty()
          ? ""
          : absl::StrCat(
                thin,
                "\nRanks that could not run when it failed (a peer that "
                "never answers makes the others time out waiting for it; "
                "look at these first):\n  ",
                absl::StrJoin(f.peers_not_running, "\n  "), "\n"),
      rule, "\n");
}

}  // namespace tandem::train
