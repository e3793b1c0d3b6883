// The Communicator conformance suite on the simulated cluster.
#include "comm/conformance/conformance.h"

#include <memory>

#include "sim/sim_launcher.h"

namespace tandem::sim {
namespace {

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    Sim, std::make_shared<SimLauncher>(),
    ::tandem::comm::conformance::SuiteOptions());

}  // namespace
}  // namespace tandem::sim
