// The Communicator conformance suite on the simulated cluster with every
// rank a fiber (sim::Options::ranks = kFibers).
#include <memory>

#include "comm/conformance/conformance.h"
#include "sim/options.h"
#include "sim/sim_launcher.h"

namespace tandem::sim {
namespace {

Options FiberOptions() {
  Options options = SimLauncher::DefaultOptions();
  options.ranks = RankExecution::kFibers;
  return options;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    SimFibers, std::make_shared<SimLauncher>(FiberOptions()),
    ::tandem::comm::conformance::SuiteOptions());

}  // namespace
}  // namespace tandem::sim
