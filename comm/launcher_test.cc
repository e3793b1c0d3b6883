#include "comm/launcher.h"

#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(MostTellingStatusTest, OkWhenEveryRankIsOk) {
  EXPECT_TRUE(MostTellingStatus({}).ok());
  EXPECT_TRUE(
      MostTellingStatus({{0, absl::OkStatus()}, {1, absl::OkStatus()}}).ok());
}

TEST(MostTellingStatusTest, TheCauseWinsOverTheRanksItAborted) {
  const absl::Status s =
      MostTellingStatus({{0, absl::AbortedError("rank 2 failed")},
                         {1, absl::OkStatus()},
                         {2, absl::InvalidArgumentError("bad batch")},
                         {3, absl::DataLossError("later")}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "rank 2: bad batch");
}

TEST(MostTellingStatusTest, FirstAbortedWhenNothingElseFailed) {
  const absl::Status s =
      MostTellingStatus({{0, absl::OkStatus()},
                         {5, absl::AbortedError("peer gone")},
                         {6, absl::AbortedError("other")}});
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "rank 5: peer gone");
}

TEST(CommDeviceTest, HostByDefaultCudaWithOrdinal) {
  EXPECT_EQ(CommDevice(), CommDevice::Host());
  EXPECT_EQ(CommDevice::Host().space, MemorySpace::kHost);
  EXPECT_EQ(CommDevice::Cuda(3).space, MemorySpace::kCuda);
  EXPECT_EQ(CommDevice::Cuda(3).ordinal, 3);
  EXPECT_FALSE(CommDevice::Cuda(0) == CommDevice::Cuda(1));
}

}  // namespace
}  // namespace tandem::comm
