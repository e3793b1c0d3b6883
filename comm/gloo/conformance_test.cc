// The Communicator conformance suite on the gloo engine. Started by
// tandemrun_test.sh under tandemrun --nproc_per_node=2, 3 and 4; each process
// is one rank and the world sizes not started are skipped.
#include "comm/conformance/conformance.h"

#include <memory>

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

}  // namespace

int RunAll(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  TheLauncher()->Shutdown();
  return rc;
}

}  // namespace tandem::comm

int main(int argc, char** argv) { return tandem::comm::RunAll(argc, argv); }
