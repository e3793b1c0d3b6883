// SyncBatchNorm under mpirun: the check of sync_batch_norm_scenario.h
// (SyncBatchNorm at N ranks with b samples each equals BatchNorm2d at one
// rank with the N * b samples) with each rank one process of the job, at
// the job's size (-np 2, 3, 4 in the BUILD).
#include "comm/launcher.h"
#include "comm/mpi/mpi_launcher.h"
#include "gtest/gtest.h"
#include "train/parallel/ddp/sync_batch_norm_scenario.h"

namespace tandem::train {
namespace {

comm::MpiLauncher& TheLauncher() {
  static auto* launcher = new comm::MpiLauncher();
  return *launcher;
}

// One case per world size; the cases other than the job's size skip.
class SyncBatchNormMpiTest : public ::testing::TestWithParam<int> {};

TEST_P(SyncBatchNormMpiTest, EqualsBatchNormOverTheGlobalBatch) {
  const int n = GetParam();
  if (absl::Status s = TheLauncher().CanRun(n); !s.ok()) GTEST_SKIP() << s;
  for (const comm::RankStatus& r :
       TheLauncher().Run(n, [](int, comm::Communicator& comm) {
         return sync_bn_testing::CheckSyncBatchNormRank(comm);
       })) {
    EXPECT_TRUE(r.status.ok()) << "rank " << r.rank << ": " << r.status;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, SyncBatchNormMpiTest,
                         ::testing::Values(2, 3, 4));

}  // namespace
}  // namespace tandem::train

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  tandem::train::TheLauncher().Shutdown();
  return rc;
}
