// DDP inside a train::Join with uneven inputs under mpirun: the cases of
// ddp_join_testing.h whose world size is the job's (3, 5, 4 batches at
// -np 3; 2, 3, 1, 3 at -np 4), each process one rank. Others are skipped.
#include <memory>
#include <string>

#include "comm/launcher.h"
#include "comm/mpi/mpi_launcher.h"
#include "gtest/gtest.h"
#include "train/parallel/ddp/ddp_join_testing.h"

namespace tandem::train {
namespace {

comm::MpiLauncher& TheLauncher() {
  static auto* launcher = new comm::MpiLauncher();
  return *launcher;
}

class JoinMpiTest : public ::testing::TestWithParam<JoinCase> {};

TEST_P(JoinMpiTest, UnevenInputsTrainToTheEnd) {
  const JoinCase c = GetParam();
  const int n = static_cast<int>(c.batches.size());
  if (absl::Status s = TheLauncher().CanRun(n); !s.ok()) {
    GTEST_SKIP() << s;
  }
  for (const comm::RankStatus& r :
       TheLauncher().Run(n, [&](int rank, comm::Communicator&comm) {
         return RunUnevenJoin(c, rank, comm);
       })) {
    EXPECT_TRUE(r.status.ok()) << "rank " << r.rank << ": " << r.status;
  }
}

INSTANTIATE_TEST_SUITE_P(Batches, JoinMpiTest, ::testing::ValuesIn(JoinCases()),
                         [](const ::testing::TestParamInfo<JoinCase>& info) {
                           return JoinCaseName(info.param);
                         });

}  // namespace
}  // namespace tandem::train

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  tandem::train::TheLauncher().Shutdown();
  return rc;
}
