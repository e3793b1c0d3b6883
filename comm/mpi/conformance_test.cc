// The Communicator conformance suite on the MPI backend. Started by
// mpirun_test.sh with -np 2, 3 and 4; each process is one rank and the
// world sizes mpirun did not start are skipped. The MpiSplit cases run
// the same suite on sub-communicators (Communicator::Split).
#include "comm/conformance/conformance.h"

#include <cstdint>
#include <memory>

#include "comm/conformance/split_launcher.h"
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

// The suite on sub-communicators (MPI_Comm_split by parity): under -np 4
// two 2-rank communicators run it at once, under -np 2 two 1-rank ones.
::tandem::comm::conformance::SuiteOptions SplitOptions() {
  ::tandem::comm::conformance::SuiteOptions options;
  options.max_bytes = int64_t{1} << 20;
  return options;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    MpiSplit,
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
