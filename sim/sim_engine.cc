// The sim engine's entry in the launch registry (comm/engine.h): N ranks as
// threads (or fibers) of this process, auto's last choice.
#include <memory>

#include "comm/engine.h"
#include "sim/sim.h"
#include "sim/sim_launcher.h"

namespace tandem::sim {
namespace {

using comm::Engine;
using comm::LaunchContext;
using comm::RunOptions;

Engine SimEngine() {
  Engine e;
  e.name = "sim";
  e.description = "ranks as threads in this process";
  e.auto_order = 2;
  e.auto_picks = [](const LaunchContext&) { return true; };
  e.default_world_size = [](const LaunchContext& here) {
    return here.gpu_count > 0 ? here.gpu_count : 2;
  };
  e.available = [](int world_size, const LaunchContext&) {
    return SimLauncher().CanRun(world_size);
  };
  e.make_launcher = [](const RunOptions& options) {
    Options sim_options;
    sim_options.timeout = options.timeout;
    sim_options.stall_note_interval = options.stall_note_interval;
    if (options.spin.has_value()) sim_options.spin = *options.spin;
    if (options.sim_fibers) sim_options.ranks = RankExecution::kFibers;
    if (options.sim_stack_bytes > 0) {
      sim_options.stack_bytes = options.sim_stack_bytes;
    }
    return std::make_unique<SimLauncher>(sim_options);
  };
  return e;
}

TANDEM_REGISTER_ENGINE(10, SimEngine);

}  // namespace
}  // namespace tandem::sim
