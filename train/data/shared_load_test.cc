#include "train/data/shared_load.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

TEST(SharedLoadTest, ConcurrentCallersShareOneLoad) {
  SharedLoad<std::vector<int>> cache;
  constexpr int kThreads = 16;
  std::vector<std::shared_ptr<const std::vector<int>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::shared_ptr<const std::vector<int>>> v =
          cache.Get("data.csv", []() -> absl::StatusOr<std::vector<int>> {
            return std::vector<int>{1, 2, 3};
          });
      if (v.ok()) got[t] = *v;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(cache.loads(), 1);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_NE(got[t], nullptr);
    EXPECT_EQ(got[t].get(), got[0].get());  // the very same object
  }
  EXPECT_EQ(*got[0], (std::vector<int>{1, 2, 3}));
}

TEST(SharedLoadTest, DistinctKeysLoadSeparately) {
  SharedLoad<int> cache;
  auto a = cache.Get("a", []() -> absl::StatusOr<int> { return 1; });
  auto b = cache.Get("b", []() -> absl::StatusOr<int> { return 2; });
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(**a, 1);
  EXPECT_EQ(**b, 2);
  EXPECT_EQ(cache.loads(), 2);
}

TEST(SharedLoadTest, ReloadsOnceTheLastHolderLetsGo) {
  SharedLoad<int> cache;
  int calls = 0;
  auto load = [&]() -> absl::StatusOr<int> { return ++calls; };
  {
    auto first = cache.Get("k", load);
    auto second = cache.Get("k", load);
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(**second, 1);
  }
  auto third = cache.Get("k", load);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(**third, 2);  // freed in between, loaded again
}

TEST(SharedLoadTest, AFailedLoadIsNotCached) {
  SharedLoad<int> cache;
  auto bad = cache.Get("k", []() -> absl::StatusOr<int> {
    return absl::NotFoundError("no such file");
  });
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  auto good = cache.Get("k", []() -> absl::StatusOr<int> { return 7; });
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(**good, 7);
}

}  // namespace
}  // namespace tandem::train
