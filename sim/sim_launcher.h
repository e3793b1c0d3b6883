// SimLauncher: starts a world of ranks on the simulated cluster, every rank a
// thread (or fiber: Options::ranks) of this process (sim::Run behind the
// comm::Launcher interface). The conformance suite (comm/conformance) and the
// launch registry (train/launch/registry.h) both start sim through it.
//
//   TANDEM_INSTANTIATE_COMM_CONFORMANCE(
//       Sim, std::make_shared<tandem::sim::SimLauncher>(),
//       tandem::comm::conformance::SuiteOptions());
#ifndef TANDEM_SIM_SIM_LAUNCHER_H_
#define TANDEM_SIM_SIM_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/launcher.h"
#include "sim/sim.h"

namespace tandem::sim {

class SimLauncher : public comm::Launcher {
 public:
  // `options` for every run; its timeout bounds each operation.
  explicit SimLauncher(Options options = DefaultOptions());

  std::string name() const override { return "sim"; }
  // InvalidArgument outside 1 to kMaxWorldSize.
  absl::Status CanRun(int world_size) const override;
  std::vector<comm::RankStatus> Run(int world_size,
                                    const comm::RankFn& fn) override;

  // One minute per operation: generous for 16 MiB under ThreadSanitizer,
  // far below the test watchdog.
  static Options DefaultOptions();

 private:
  Options options_;
};

}  // namespace tandem::sim

#endif  // TANDEM_SIM_SIM_LAUNCHER_H_
