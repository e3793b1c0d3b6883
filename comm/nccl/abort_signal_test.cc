#include "comm/nccl/abort_signal.h"

#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

TEST(AbortSignalTest, StartsLowered) {
  AbortSignal signal;
  EXPECT_FALSE(signal.raised());
  EXPECT_TRUE(signal.cause().ok());
}

TEST(AbortSignalTest, FirstRaiseWinsAndNamesTheRank) {
  AbortSignal signal;
  EXPECT_TRUE(signal.Raise(2, absl::InternalError("bad gradient")));
  EXPECT_FALSE(signal.Raise(0, absl::InternalError("later")));
  ASSERT_TRUE(signal.raised());
  EXPECT_EQ(signal.cause().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(signal.cause().message(), HasSubstr("rank 2 failed"));
  EXPECT_THAT(signal.cause().message(), HasSubstr("bad gradient"));
  EXPECT_THAT(signal.cause().message(), ::testing::Not(HasSubstr("later")));
}

TEST(AbortSignalTest, ConcurrentRaisesKeepExactlyOne) {
  AbortSignal signal;
  std::vector<std::thread> threads;
  std::vector<int> won(8, 0);
  for (int r = 0; r < 8; ++r) {
    threads.emplace_back([&, r] {
      won[r] = signal.Raise(r, absl::UnavailableError("x")) ? 1 : 0;
    });
  }
  for (std::thread& t : threads) t.join();
  int winners = 0;
  for (int w : won) winners += w;
  EXPECT_EQ(winners, 1);
  EXPECT_TRUE(signal.raised());
}

}  // namespace
}  // namespace tandem::comm
