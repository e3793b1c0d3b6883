// The Communicator conformance suite on the MPI backend. Started by
// mpirun_test.sh with -np 2, 3 and 4; each process is one rank and the
// world sizes mpirun did not start are skipped.
#include "comm/conformance/conformance.h"

#include <memory>

#include "comm/mpi/mpi_launcher.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

std::shared_ptr<MpiLauncher>& TheLauncher() {
  static auto* launcher =
      new std::shared_ptr<MpiLauncher>(std::make_shared<MpiLauncher>());
  return *launcher;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    Mpi, TheLauncher(), ::tandem::comm::conformance::SuiteOptions());

}  // namespace

int RunAll(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  TheLauncher()->Shutdown();
  return rc;
}

}  // namespace tandem::comm

int main(int argc, char** argv) { return tandem::comm::RunAll(argc, argv); }
