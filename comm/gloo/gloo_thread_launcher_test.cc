// GlooThreadLauncher: the world sizes it accepts, every rank's status in
// rank order, and fresh worlds on repeated runs over one store.
#include "comm/gloo/gloo_thread_launcher.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

TEST(GlooThreadLauncherTest, CanRunOneToSixteenRanks) {
  GlooThreadLauncher launcher;
  EXPECT_EQ(launcher.name(), "gloo-threads");
  EXPECT_TRUE(launcher.CanRun(1).ok());
  EXPECT_TRUE(launcher.CanRun(16).ok());
  EXPECT_EQ(launcher.CanRun(0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(launcher.CanRun(17).message(), HasSubstr("tandemrun"));
  std::vector<RankStatus> refused =
      launcher.Run(17, [](int, Communicator&) { return absl::OkStatus(); });
  ASSERT_EQ(refused.size(), 17u);
  EXPECT_EQ(refused[3].status.code(), absl::StatusCode::kFailedPrecondition);
}

// Each rank's status at its index; two runs on one launcher are two worlds
// (the second's all-reduce sums only its own ranks).
TEST(GlooThreadLauncherTest, ReportsEveryRankAndRunsFreshWorlds) {
  GlooThreadLauncher launcher;
  for (int run = 0; run < 2; ++run) {
    std::vector<RankStatus> statuses =
        launcher.Run(3, [run](int rank, Communicator& comm) -> absl::Status {
          if (comm.rank() != rank || comm.size() != 3 ||
              comm.backend() != "gloo") {
            return absl::InternalError("wrong communicator");
          }
          std::vector<int32_t> v = {rank + 1};
          absl::Status s =
              comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)
                  ->Wait();
          if (!s.ok()) return s;
          if (v[0] != 6) return absl::InternalError(absl::StrCat("sum ", v[0]));
          if (rank == 2) return absl::NotFoundError(absl::StrCat("run ", run));
          return absl::OkStatus();
        });
    ASSERT_EQ(statuses.size(), 3u);
    for (int r = 0; r < 3; ++r) EXPECT_EQ(statuses[r].rank, r);
    EXPECT_TRUE(statuses[0].status.ok()) << statuses[0].status;
    EXPECT_TRUE(statuses[1].status.ok()) << statuses[1].status;
    EXPECT_EQ(statuses[2].status,
              absl::NotFoundError(absl::StrCat("run ", run)));
  }
}

}  // namespace
}  // namespace tandem::comm
