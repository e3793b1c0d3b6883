// The gloo engine's entry in the launch registry (comm/engine.h): this
// process is one rank of a job started by tandemrun or torchrun; auto's
// choice there with more than one rank and no GPU.
#include <sys/resource.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm/engine.h"
#include "comm/gloo/gloo_launcher.h"

namespace tandem::comm {
namespace {

// Descriptors a gloo rank needs besides its peers' sockets (store, files).
constexpr int64_t kGlooOwnFds = 64;

Engine GlooEngine() {
  Engine e;
  e.name = "gloo";
  e.description = "one process per rank, under tandemrun or torchrun";
  e.joins_launched_world = true;
  e.launchers = {"torchrun"};
  e.auto_order = 0;
  // Under tandemrun with GPUs, auto picks nccl (one process per GPU).
  e.auto_picks = [](const LaunchContext& here) {
    return here.under_torchrun() && here.launched_world_size() > 1 &&
           here.gpu_count == 0;
  };
  e.default_world_size = [](const LaunchContext& here) {
    return here.under_torchrun() ? here.launched_world_size() : 1;
  };
  e.available = [](int world_size, const LaunchContext& here) -> absl::Status {
    if (!here.under_torchrun()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gloo joins jobs started by tandemrun or torchrun, and this "
          "process was ",
          here.launch.has_value()
              ? absl::StrCat("started by ", here.launch->launcher)
              : std::string("started alone"),
          "; start the job with tandemrun --nproc_per_node=N -- <binary> "
          "--backend=gloo"));
    }
    if (here.launch->master_addr.empty() || here.launch->master_port == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "gloo needs MASTER_ADDR and MASTER_PORT (where the ranks meet) "
          "besides RANK and WORLD_SIZE, and found MASTER_ADDR='",
          here.launch->master_addr, "' MASTER_PORT=", here.launch->master_port,
          "; start the job with tandemrun --nproc_per_node=",
          here.launched_world_size(), " -- <binary>, which sets them all"));
    }
    // Gloo connects every rank to every other: a socket per peer in each
    // process. Refused before any allocation or rendezvous of that size.
    rlimit files = {};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
        files.rlim_cur != RLIM_INFINITY &&
        static_cast<int64_t>(here.launched_world_size()) + kGlooOwnFds >
            static_cast<int64_t>(files.rlim_cur)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WORLD_SIZE=", here.launched_world_size(),
          " cannot run here: gloo connects every rank to every other (a "
          "socket per peer), and the open-file limit (ulimit -n = ",
          files.rlim_cur, ") allows at most ",
          static_cast<int64_t>(files.rlim_cur) - kGlooOwnFds,
          " ranks; start fewer ranks or raise the limit"));
    }
    if (world_size != here.launched_world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the tandemrun job has ", here.launched_world_size(),
          " rank(s) (WORLD_SIZE); start it with tandemrun --nproc_per_node=",
          world_size, " (or drop --world_size)"));
    }
    return absl::OkStatus();
  };
  e.make_launcher = [](const RunOptions& options) {
    auto launcher = std::make_unique<GlooLauncher>(options.timeout);
    // The runner's note interval (a tenth of --timeout, at most 30 s): with
    // gloo's own 30 s default a collective that times out sooner never
    // learned which ranks had not reached it.
    launcher->set_stall_note_interval(options.stall_note_interval);
    return launcher;
  };
  return e;
}

TANDEM_REGISTER_ENGINE(40, GlooEngine);

}  // namespace
}  // namespace tandem::comm
