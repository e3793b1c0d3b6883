#include "base/unshared_status.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(UnsharedStatusTest, KeepsCodeMessageAndPayloads) {
  absl::Status original = absl::AbortedError("gloo rank 1: peer exited");
  original.SetPayload("tandem/rank", absl::Cord("1"));
  const absl::Status copy = UnsharedStatus(original);
  EXPECT_EQ(copy, original);
  EXPECT_EQ(copy.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(copy.message(), "gloo rank 1: peer exited");
  ASSERT_TRUE(copy.GetPayload("tandem/rank").has_value());
  EXPECT_EQ(std::string(*copy.GetPayload("tandem/rank")), "1");
}

TEST(UnsharedStatusTest, SharesNoStorageWithTheOriginal) {
  const absl::Status original = absl::InternalError("a message on the heap");
  const absl::Status shared = original;  // a plain copy shares the record
  ASSERT_EQ(shared.message().data(), original.message().data());
  const absl::Status unshared = UnsharedStatus(original);
  EXPECT_NE(unshared.message().data(), original.message().data());
}

TEST(UnsharedStatusTest, OutlivesTheOriginal) {
  absl::Status copy;
  {
    const absl::Status original = absl::UnavailableError(std::string(200, 'x'));
    copy = UnsharedStatus(original);
  }
  EXPECT_EQ(copy.message(), std::string(200, 'x'));
}

TEST(UnsharedStatusTest, OkStaysOk) {
  EXPECT_TRUE(UnsharedStatus(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace tandem
