#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "train/launch/worker_group.h"

namespace tandem::train {
namespace {

// Refuses, before any worker starts, a node size that this machine's limits
// cannot hold (so a huge --nproc_per_node neither aborts allocating nor
// spawns until file descriptors run out).
absl::Status CheckLimits(int nproc) {
  const auto refuse = [&](int64_t limit, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("tandemrun: --nproc_per_node=", nproc,
                     " cannot run here: ", what, " allows ", limit,
                     "; start fewer workers per node (or raise the "
                     "limit)"));
  };
  // tandemrun holds a pipe per worker, and a few descriptors of its own.
  constexpr int64_t kOwnFds = 32;
  rlimit lim = {};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      nproc + kOwnFds > static_cast<int64_t>(lim.rlim_cur)) {
    return refuse(static_cast<int64_t>(lim.rlim_cur) - kOwnFds,
                  absl::StrCat("each worker needs a file descriptor for its "
                               "stderr pipe, and the open-file limit "
                               "(ulimit -n = ",
                               lim.rlim_cur, ")"));
  }
  if (getrlimit(RLIMIT_NPROC, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      nproc > static_cast<int64_t>(lim.rlim_cur)) {
    return refuse(static_cast<int64_t>(lim.rlim_cur),
                  "the process limit (ulimit -u)");
  }
  for (const char* file :
       {"/proc/sys/kernel/pid_max", "/sys/fs/cgroup/pids.max",
        "/sys/fs/cgroup/pids/pids.max"}) {
    std::ifstream in(file);
    int64_t max = 0;
    if (in >> max && max > 0 && nproc >= max) {
      return refuse(max - 1, absl::StrCat("the process limit in ", file));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWorkerGroupOptions(const WorkerGroupOptions& o) {
  if (o.command.empty() || o.command[0].empty()) {
    return absl::InvalidArgumentError(
        "tandemrun: no worker program given; usage: tandemrun "
        "--nproc_per_node=N -- PROGRAM [ARGS...]");
  }
  if (o.nproc_per_node < 1 || o.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tandemrun: --nproc_per_node=", o.nproc_per_node,
                     " and --nnodes=", o.nnodes, " must both be at least 1"));
  }
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("tandemrun: --node_rank=", o.node_rank,
                     " is outside [0, --nnodes=", o.nnodes, ")"));
  }
  if (o.master_port < 0 || o.master_port > 65535 ||
      (o.master_port == 0 && o.nnodes > 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tandemrun: --master_port=", o.master_port,
        " must be in [1, 65535] (0, any free port, only with --nnodes=1)"));
  }
  if (o.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tandemrun: --max_restarts=", o.max_restarts, " must be at least 0"));
  }
  if (static_cast<int64_t>(o.nnodes) * o.nproc_per_node > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("tandemrun: --nnodes=", o.nnodes,
                     " x --nproc_per_node=", o.nproc_per_node,
                     " ranks do not fit WORLD_SIZE (at most ", INT32_MAX, ")"));
  }
  return CheckLimits(o.nproc_per_node);
}

}  // namespace tandem::train
