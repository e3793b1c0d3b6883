#include "sim/sim_launcher.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::sim {
namespace {

using ::testing::HasSubstr;

TEST(SimLauncherTest, CanRunOneToMaxWorldSize) {
  SimLauncher launcher;
  EXPECT_EQ(launcher.name(), "sim");
  EXPECT_TRUE(launcher.CanRun(1).ok());
  EXPECT_TRUE(launcher.CanRun(kMaxWorldSize).ok());
  for (int bad : {0, -1, kMaxWorldSize + 1}) {
    absl::Status s = launcher.CanRun(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("the simulated cluster runs 1 to 8192 ranks, not " +
                          std::to_string(bad)));
  }
}

TEST(SimLauncherTest, RunReturnsEveryRankOnTheHost) {
  SimLauncher launcher;
  std::vector<comm::RankStatus> out =
      launcher.Run(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        if (comm.rank() != rank || comm.device() != comm::CommDevice::Host()) {
          return absl::InternalError("wrong rank or device");
        }
        return rank == 2 ? absl::DataLossError("rank 2 says no")
                         : comm.Barrier();
      });
  ASSERT_EQ(out.size(), 3u);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(out[r].rank, r);
  EXPECT_EQ(out[2].status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(comm::MostTellingStatus(out).message(), "rank 2: rank 2 says no");
}

TEST(SimLauncherTest, TheOptionsTimeoutBoundsEveryWait) {
  Options options;
  options.timeout = absl::Milliseconds(100);
  SimLauncher launcher(options);
  std::vector<comm::RankStatus> out =
      launcher.Run(2, [](int rank, comm::Communicator& comm) {
        if (rank == 1) absl::SleepFor(absl::Seconds(2));
        return comm.Barrier();
      });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace tandem::sim
