#include "sim/rank_thread.h"

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tandem::sim::internal {
namespace {

// The size of the calling thread's stack, as the thread library reports it.
int64_t CurrentStackBytes() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return -1;
  size_t size = 0;
  pthread_attr_getstacksize(&attr, &size);
  pthread_attr_destroy(&attr);
  return static_cast<int64_t>(size);
}

// Sizes of 1 MiB and up: ThreadSanitizer enlarges smaller stacks.
TEST(RankThreadTest, RunsTheFunctionOnAStackOfTheRequestedSize) {
  std::atomic<int64_t> seen{0};
  auto thread = RankThread::Start([&] { seen = CurrentStackBytes(); },
                                  /*stack_bytes=*/1 << 20);
  ASSERT_TRUE(thread.ok()) << thread.status();
  (*thread)->Join();
  EXPECT_EQ(seen.load(), 1 << 20);
}

TEST(RankThreadTest, RoundsUpToWholePages) {
  std::atomic<int64_t> seen{0};
  auto thread = RankThread::Start([&] { seen = CurrentStackBytes(); },
                                  /*stack_bytes=*/(1 << 20) + 1);
  ASSERT_TRUE(thread.ok()) << thread.status();
  (*thread)->Join();
  EXPECT_GT(seen.load(), 1 << 20);
  EXPECT_EQ(seen.load() % 4096, 0);
}

TEST(RankThreadTest, ZeroMeansTheSystemDefault) {
  std::atomic<bool> ran{false};
  auto thread = RankThread::Start([&] { ran = true; }, 0);
  ASSERT_TRUE(thread.ok()) << thread.status();
  (*thread)->Join();
  (*thread)->Join();  // idempotent
  EXPECT_TRUE(ran.load());
}

TEST(RankThreadTest, DestructorJoins) {
  std::atomic<bool> ran{false};
  {
    auto thread = RankThread::Start([&] { ran = true; }, 128 << 10);
    ASSERT_TRUE(thread.ok()) << thread.status();
  }
  EXPECT_TRUE(ran.load());
}

TEST(RankThreadTest, RefusesANegativeSize) {
  auto thread = RankThread::Start([] {}, -1);
  EXPECT_EQ(thread.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(thread.status().message().find("found -1"), std::string::npos);
}

}  // namespace
}  // namespace tandem::sim::internal
