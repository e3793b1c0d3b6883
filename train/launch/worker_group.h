// The local half of tandemrun: starts this node's workers with torchrun's
// environment, watches them, stops them all when one fails, restarts the
// group up to max_restarts times, and explains the failure the way torchrun's
// ChildFailedError does. With several nodes the agents act as one through
// the job's store (agent_sync.h): a failure on any node stops and restarts
// the workers of every node, and every node counts the same restarts.
//
//   WorkerGroupOptions options;
//   options.command = {"bazel-bin/train/toy_ddp", "--backend=gloo"};
//   options.nproc_per_node = 2;
//   absl::StatusOr<WorkerGroupResult> result = RunWorkerGroup(options);
//   if (result.ok() && result->failure) std::cerr << FailureReport(...);
//
// Each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// GROUP_RANK, ROLE_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS and
// TORCHELASTIC_USE_AGENT_STORE=True (node 0's agent hosts the TCP store for
// the whole job, so rank 0 does not host one, and every worker keys its
// attempt under "/worker/attempt_<k>/"), on top of tandemrun's own
// environment.
// stdout is inherited untouched; stderr passes through a pipe, forwarded
// line by line (line_forwarder.h: whole lines up to 64 KiB, so workers'
// lines never interleave mid-line) while the last lines of each worker are
// kept for the report.
//
// Every worker leads a process group of its own, signalled as a group, and
// nothing of a group outlives its attempt (worker_process.h); RunWorkerGroup
// makes this process the child subreaper of its workers and forks a
// watchdog that ends the groups if this process dies first.
//
// Blocking: RunWorkerGroup returns when every worker of the last attempt has
// exited. Every wait is bounded: a stopped worker's group gets SIGTERM, then
// SIGKILL after stop_grace. Not thread-safe; call from one thread.
#ifndef TANDEM_TRAIN_LAUNCH_WORKER_GROUP_H_
#define TANDEM_TRAIN_LAUNCH_WORKER_GROUP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::train {

struct WorkerGroupOptions {
  // The worker program and its arguments; the program is looked up on PATH.
  std::vector<std::string> command;
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  // The store's port. 0 (node 0 only): any free port, told to the workers.
  int master_port = 29500;
  int max_restarts = 0;
  // torchrun's --rdzv_id: part of what every node must agree on.
  std::string rdzv_id;
  // How long a stopped worker has between SIGTERM and SIGKILL.
  absl::Duration stop_grace = absl::Seconds(5);
  // Lines of each worker's stderr kept for the failure report.
  int stderr_tail_lines = 10;
  // Read end of a pipe on which the caller writes one byte per signal it
  // wants forwarded to the workers (its signal handler does); -1: none.
  // A forwarded signal ends the group without a restart.
  int signal_fd = -1;
  // Several nodes: bounds how long the agents wait for each other (to
  // connect, to start an attempt, to finish one; agent_sync.h).
  absl::Duration agent_timeout = absl::Seconds(300);
  // Several nodes: bounds joining the job (reaching node 0's store, every
  // node's arrival, each attempt's start); torchrun's --rdzv_timeout.
  absl::Duration rdzv_timeout = absl::Seconds(300);
  // Several nodes: while an agents' wait is stuck, a line on stderr this
  // often naming the missing nodes (agent_sync.h); 0: none.
  absl::Duration stall_note_interval = absl::Seconds(30);
};

struct WorkerFailure {
  int rank = 0;
  int local_rank = 0;
  int64_t pid = 0;
  int exit_code = 0;  // when it exited
  int signal = 0;     // when a signal killed it (exit_code is then 0)
  std::vector<std::string> stderr_tail;
  absl::Time time;
  // The other workers of this node that were alive but could not run when
  // it failed ("rank 1 (local_rank: 1, pid: 4242): stopped (SIGSTOP or
  // SIGTSTP)"): a stopped peer never answers, so the worker that failed
  // is often one that timed out waiting for it.
  std::vector<std::string> peers_not_running;
};

struct WorkerGroupResult {
  // 0 when every worker of the last attempt exited 0; 1 after a failure
  // with no restarts left; 128 + signal after a forwarded signal.
  int exit_code = 0;
  // The first failure of the last attempt on this node (none after a clean
  // run or a forwarded signal).
  std::optional<WorkerFailure> failure;
  // Several nodes: the failure another node reported for the last attempt,
  // which stopped this node's workers ("node 1: rank 9 failed (exit code
  // 1)"); none when this node's own worker failed first.
  std::optional<std::string> remote_failure;
  // Several nodes: another node was stopped by a signal, so this one ended
  // too, without restarting (exit code 1): that node's reason.
  std::optional<std::string> stopped;
  // The signal forwarded through signal_fd that ended the job (exit code
  // 128 + signal), also while the agents were waiting for each other.
  int signal = 0;
  int restarts = 0;     // how many times the group was restarted
  int master_port = 0;  // the port the workers were told
};

// InvalidArgument for options that cannot work (no command, a size below
// 1, node_rank outside [0, nnodes), master_port 0 on a node that does not
// host the store, a world beyond INT32_MAX) or that this machine cannot run
// (more workers than ulimit -n, ulimit -u, pid_max or the cgroup's pids.max
// allow), in one line naming the limit. RunWorkerGroup checks it first.
absl::Status CheckWorkerGroupOptions(const WorkerGroupOptions& options);

// CheckWorkerGroupOptions's InvalidArgument; Unavailable when the store
// cannot listen or a worker cannot be started (naming the program). Worker
// failures are not errors: they are in the result.
absl::StatusOr<WorkerGroupResult> RunWorkerGroup(
    const WorkerGroupOptions& options);

// torchrun's ChildFailedError report for `failure` of `program`.
std::string FailureReport(const std::string& program,
                          const WorkerFailure& failure);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_WORKER_GROUP_H_
