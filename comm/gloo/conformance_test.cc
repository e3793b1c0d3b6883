// The Communicator conformance suite on the gloo engine. Started by
// tandemrun_test.sh under tandemrun --nproc_per_node=2, 3 and 4; each process
// is one rank and the world sizes not started are skipped. The GlooSplit
// cases run the same suite on sub-communicators (Communicator::Split).
#include "comm/conformance/conformance.h"

#include <cstdint>
#include <memory>

#include "comm/conformance/split_launcher.h"
#include "comm/gloo/gloo_launcher.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

std::shared_ptr<GlooLauncher>& TheLauncher() {
  static auto* launcher =
      new std::shared_ptr<GlooLauncher>(std::make_shared<GlooLauncher>());
  return *launcher;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    Gloo, TheLauncher(), ::tandem::comm::conformance::SuiteOptions());

// The suite on sub-communicators (split by parity): under
// --nproc_per_node=4 two 2-rank communicators run it at once, under 2 two
// 1-rank ones.
::tandem::comm::conformance::SuiteOptions SplitOptions() {
  ::tandem::comm::conformance::SuiteOptions options;
  options.max_bytes = int64_t{1} << 20;
  return options;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    GlooSplit,
    std::make_shared<::tandem::comm::conformance::SplitLauncher>(TheLauncher()),
    SplitOptions());

}  // namespace

int RunAll(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  TheLauncher()->Shutdown();
  return rc;
}

}  // namespace tandem::comm

int main(int argc, char** argv) { return tandem::comm::RunAll(argc, argv); }
