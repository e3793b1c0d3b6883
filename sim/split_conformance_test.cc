// The Communicator conformance suite on sub-communicators of the simulated
// cluster: 2n ranks split by parity into two n-rank communicators that run
// the suite at the same time (comm/conformance/split_launcher.h).
#include <memory>

#include "comm/conformance/conformance.h"
#include "comm/conformance/split_launcher.h"
#include "sim/sim_launcher.h"

namespace tandem::sim {
namespace {

::tandem::comm::conformance::SuiteOptions SplitOptions() {
  ::tandem::comm::conformance::SuiteOptions options;
  options.world_sizes = {1, 2, 3};
  options.max_bytes = int64_t{256} << 10;  // twice the ranks: kept small
  return options;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    SimSplit,
    std::make_shared<::tandem::comm::conformance::SplitLauncher>(
        std::make_shared<SimLauncher>()),
    SplitOptions());

}  // namespace
}  // namespace tandem::sim
