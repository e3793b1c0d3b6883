// How tandemrun starts one worker so that nothing of it outlives the job.
//
// Every worker runs in a process group of its own (pgid == its pid), so a
// worker started through a shell or a wrapper script is stopped together
// with the programs it started (data-loader processes, `sleep 50 &`):
// tandemrun signals the group, never just the pid. The worker gets
// PR_SET_PDEATHSIG (SIGTERM when tandemrun dies), and a Watchdog process
// ends every group (SIGTERM, then SIGKILL after the grace period) when
// tandemrun dies without doing so itself (kill -9), as mpirun's ranks go
// with mpirun.
//
//   BecomeSubreaper();  // orphaned grandchildren come back to us
//   absl::StatusOr<pid_t> pid = SpawnInOwnGroup(argv, env, err_fd, rank);
//   SignalGroup(*pid, SIGTERM);
//   EndGroups({*pid}, absl::Seconds(5));
//
// Not thread-safe; one agent thread calls these.
#ifndef TANDEM_TRAIN_LAUNCH_WORKER_PROCESS_H_
#define TANDEM_TRAIN_LAUNCH_WORKER_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tandem::train {

// Makes this process the child subreaper of its descendants
// (PR_SET_CHILD_SUBREAPER), so the orphaned children of a worker are reaped
// here (ReapGroup) instead of lingering as zombies in its process group.
void BecomeSubreaper();

// Starts argv[0] (looked up on PATH when it has no '/') with `env`, its
// stderr on `stderr_fd`, in a new process group, with SIGTERM as its
// parent-death signal. Unavailable naming the program and `rank` when it
// cannot be started (not found, not executable): the exec's error comes back
// through a pipe, so a failed exec is never mistaken for a worker that ran.
absl::StatusOr<pid_t> SpawnInOwnGroup(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env,
                                      int stderr_fd, int rank);

// killpg(pgid, sig); a group that is gone is not an error.
void SignalGroup(pid_t pgid, int sig);

// Reaps every exited child in group `pgid` without blocking. Returns the
// wait status of `leader` if it was reaped by this call.
std::optional<int> ReapGroup(pid_t pgid, pid_t leader);

// Whether any process of group `pgid` still exists (after reaping ours).
bool GroupAlive(pid_t pgid);

// Ends what is left of `pgids`: SIGTERM to each group still alive, up to
// `grace` for them to go, then SIGKILL. Blocks at most about `grace`.
void EndGroups(const std::vector<pid_t>& pgids, absl::Duration grace);

// A process that outlives tandemrun to stop its workers: told each group as
// it starts and ends, it ends the groups still running (SIGTERM, then
// SIGKILL after `grace`) when the socket from tandemrun closes without a
// goodbye, which is what a kill -9 of tandemrun does. It runs in a process
// group of its own (a signal to tandemrun's group does not take it away
// first), ignores SIGINT/SIGTERM/SIGHUP and holds no stdin or stdout.
class Watchdog {
 public:
  // Forks the watchdog; it can track up to `max_groups` groups at once.
  static absl::StatusOr<std::unique_ptr<Watchdog>> Start(absl::Duration grace,
                                                         int64_t max_groups);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // Says goodbye (the watchdog exits without signalling) and reaps it.
  ~Watchdog();

  void Add(pid_t pgid);
  void Remove(pid_t pgid);
  pid_t pid() const { return pid_; }

 private:
  Watchdog(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  void Send(int32_t message);

  pid_t pid_;
  int fd_;  // tandemrun's end of the socket the watchdog reads
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LAUNCH_WORKER_PROCESS_H_
