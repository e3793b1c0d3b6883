// CanonicalTreeSum's shape (checked against the tree written out by hand
// and a scalar reference across chunk boundaries), the property the virtual
// world rests on (ranks' partial trees combined by the tree over ranks give
// the tree over all leaves exactly when W is a power of two dividing K, or
// K), and its argument errors. The collectives are checked on every engine
// by comm/conformance (OrderedSumConformanceTest).
#include "comm/ordered/ordered_sum.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "comm/ordered/order_sensitive_terms.h"
#include "comm/tree_sum_reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::vector<std::vector<T>> Leaves(int64_t n, int64_t count) {
  std::vector<std::vector<T>> leaves(n, std::vector<T>(count));
  for (int64_t l = 0; l < n; ++l) {
    for (int64_t i = 0; i < count; ++i)
      leaves[l][i] = OrderSensitiveTerm<T>(l, i);
  }
  return leaves;
}

template <typename T>
std::vector<T> Sum(const std::vector<std::vector<T>>& leaves, int64_t count) {
  std::vector<const void*> ptrs;
  for (const auto& l : leaves) ptrs.push_back(l.data());
  std::vector<T> out(count);
  EXPECT_TRUE(CanonicalTreeSum(DTypeOf<T>(), count, ptrs, out.data()).ok());
  return out;
}

TEST(CanonicalTreeSumTest, SmallTreesAsWrittenByHand) {
  const float a = 1e8f, b = -1e8f, c = 3.0f, d = 5.0f, e = 7.0f;
  auto sum = [](std::vector<float> terms) {
    std::vector<std::vector<float>> leaves;
    for (float t : terms) leaves.push_back({t});
    return Sum<float>(leaves, 1)[0];
  };
  EXPECT_EQ(sum({a}), a);
  EXPECT_EQ(sum({a, b}), a + b);
  EXPECT_EQ(sum({a, b, c}), a + (b + c));  // mid = 1
  EXPECT_EQ(sum({a, b, c, d}), (a + b) + (c + d));
  EXPECT_EQ(sum({a, b, c, d, e}), (a + b) + (c + (d + e)));  // mid = 2
  // The shapes differ in their bits: the test can tell them apart.
  EXPECT_NE(a + (b + c), (a + b) + c);
}

TEST(CanonicalTreeSumTest, EqualsTheDefinitionAcrossChunks) {
  for (int64_t n : {1, 2, 3, 5, 8, 9, 13}) {
    for (int64_t count : {0, 1, 1023, 1024, 1025, 3000}) {
      const auto f = Leaves<float>(n, count);
      const auto d = Leaves<double>(n, count);
      const std::vector<float> fs = Sum(f, count);
      const std::vector<double> ds = Sum(d, count);
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(fs[i], TreeSumReference(f, 0, n, i)) << n << " " << i;
        ASSERT_EQ(ds[i], TreeSumReference(d, 0, n, i)) << n << " " << i;
      }
    }
  }
}

TEST(CanonicalTreeSumTest, OutMayBeALeaf) {
  auto leaves = Leaves<float>(5, 2000);
  const std::vector<float> expected = Sum(leaves, 2000);
  std::vector<const void*> ptrs;
  for (const auto& l : leaves) ptrs.push_back(l.data());
  ASSERT_TRUE(CanonicalTreeSum(DType::kF32, 2000, ptrs, leaves[0].data()).ok());
  EXPECT_EQ(leaves[0], expected);
}

// What the virtual world rests on: rank r of W sums leaves [r K/W,
// (r+1) K/W) with the tree, the ranks' sums are combined with the tree over
// W, and the result is the tree over all K leaves.
std::vector<float> TwoLevel(const std::vector<std::vector<float>>& leaves,
                            int64_t world, int64_t count) {
  const int64_t k = static_cast<int64_t>(leaves.size());
  std::vector<std::vector<float>> partials;
  for (int64_t r = 0; r < world; ++r) {
    partials.push_back(Sum(
        std::vector<std::vector<float>>(leaves.begin() + r * k / world,
                                        leaves.begin() + (r + 1) * k / world),
        count));
  }
  return Sum(partials, count);
}

TEST(CanonicalTreeSumTest, RanksPartialTreesComposeForPowersOfTwoAndK) {
  constexpr int64_t kCount = 512;
  const auto eight = Leaves<float>(8, kCount);
  for (int64_t w : {1, 2, 4, 8}) {
    EXPECT_EQ(TwoLevel(eight, w, kCount), Sum(eight, kCount)) << w;
  }
  const auto twelve = Leaves<float>(12, kCount);
  for (int64_t w : {1, 2, 4, 12}) {
    EXPECT_EQ(TwoLevel(twelve, w, kCount), Sum(twelve, kCount)) << w;
  }
  // 3 and 6 ranks cut the 12 leaves across the tree's nodes: other bits.
  EXPECT_NE(TwoLevel(twelve, 3, kCount), Sum(twelve, kCount));
  EXPECT_NE(TwoLevel(twelve, 6, kCount), Sum(twelve, kCount));
}

TEST(CanonicalTreeSumTest, RefusesWhatItCannotSum) {
  float x = 1;
  std::vector<const void*> one = {&x};
  EXPECT_THAT(CanonicalTreeSum(DType::kF32, 1, {}, &x).message(),
              HasSubstr("0 leaves"));
  EXPECT_EQ(CanonicalTreeSum(DType::kF32, -1, one, &x).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(CanonicalTreeSum(DType::kBF16, 1, one, &x).message(),
              HasSubstr("expected at least one leaf, a count >= 0 and f32 or "
                        "f64"));
}

}  // namespace
}  // namespace tandem::comm
