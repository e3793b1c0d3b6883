#include "comm/work.h"

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(CompletedWorkTest, OkByDefault) {
  auto work = MakeCompletedWork();
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_TRUE(work->Wait().ok());
  EXPECT_TRUE(work->Wait(absl::ZeroDuration()).ok());
}

TEST(CompletedWorkTest, CarriesItsErrorOnEveryWait) {
  auto work = MakeCompletedWork(absl::InvalidArgumentError("bad root"));
  EXPECT_TRUE(work->IsCompleted());
  EXPECT_EQ(work->Wait().message(), "bad root");
  EXPECT_EQ(work->Wait().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::comm
