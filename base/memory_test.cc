#include "base/memory.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

TEST(MemoryTest, PhysicalMemoryIsKnownOnLinux) {
  EXPECT_GT(PhysicalMemoryBytes(), int64_t{1} << 20);
}

TEST(MemoryTest, SmallSizesFit) {
  EXPECT_TRUE(CheckFitsInMemory(0, 8, "x").ok());
  EXPECT_TRUE(CheckFitsInMemory(1 << 20, 8, "x").ok());
}

TEST(MemoryTest, TooLargeNamesWhatAndTheFigures) {
  const int64_t machine = PhysicalMemoryBytes();
  absl::Status twice = CheckFitsInMemory(machine, 2, "--size");
  EXPECT_EQ(twice.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(twice.message(), HasSubstr("--size needs "));
  EXPECT_THAT(twice.message(), HasSubstr("GiB of physical memory"));
  absl::Status overflow = CheckFitsInMemory(INT64_MAX, 8, "--size");
  EXPECT_THAT(overflow.message(), HasSubstr("overflows a 64-bit size"));
  EXPECT_EQ(CheckFitsInMemory(-1, 8, "--size").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem
