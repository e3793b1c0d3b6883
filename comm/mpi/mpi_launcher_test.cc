// MpiLauncher's availability, read from the launcher's environment before MPI
// starts (this binary runs without mpirun: a job of one process).
#include "comm/mpi/mpi_launcher.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(MpiLauncherTest, CanRunOnlyTheSizeTheJobWasStartedWith) {
  MpiLauncher launcher;
  EXPECT_EQ(launcher.name(), "mpi");
  EXPECT_TRUE(launcher.CanRun(1).ok());
  absl::Status s = launcher.CanRun(3);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "the MPI job has 1 rank(s), not 3; start it with mpirun -np 3");
}

}  // namespace
}  // namespace tandem::comm
