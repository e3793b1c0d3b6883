// AllowedWorldSizes against the rule the docs state (powers of two that
// divide K, and K), CheckVirtualWorld's message, and TreeAccumulator
// against comm/ordered's CanonicalTreeSum: the same bits for every leaf
// count, and ranks' accumulators combined by the tree over ranks give the
// tree over every virtual rank at each allowed world size.
#include "train/parallel/core/canonical_tree.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/ordered/order_sensitive_terms.h"
#include "comm/ordered/ordered_sum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;

std::vector<float> TreeOf(const std::vector<std::vector<float>>& leaves,
                          int64_t count) {
  std::vector<const void*> ptrs;
  for (const auto& l : leaves) ptrs.push_back(l.data());
  std::vector<float> out(count);
  EXPECT_TRUE(
      comm::CanonicalTreeSum(DType::kF32, count, ptrs, out.data()).ok());
  return out;
}

std::vector<float> Accumulated(const std::vector<std::vector<float>>& leaves,
                               int64_t count) {
  absl::StatusOr<TreeAccumulator> acc = TreeAccumulator::Create(
      static_cast<int64_t>(leaves.size()), DType::kF32, count);
  EXPECT_TRUE(acc.ok()) << acc.status();
  for (const auto& l : leaves) EXPECT_TRUE(acc->Add(l.data()).ok());
  absl::StatusOr<const void*> sum = acc->result();
  EXPECT_TRUE(sum.ok()) << sum.status();
  const float* f = static_cast<const float*>(*sum);
  return std::vector<float>(f, f + count);
}

std::vector<std::vector<float>> Leaves(int64_t n, int64_t count) {
  std::vector<std::vector<float>> leaves;
  for (int64_t l = 0; l < n; ++l) {
    leaves.push_back(comm::OrderSensitiveTerms<float>(l, count));
  }
  return leaves;
}

TEST(AllowedWorldSizesTest, PowersOfTwoThatDivideKAndK) {
  EXPECT_THAT(AllowedWorldSizes(1), ElementsAre(1));
  EXPECT_THAT(AllowedWorldSizes(8), ElementsAre(1, 2, 4, 8));
  EXPECT_THAT(AllowedWorldSizes(12), ElementsAre(1, 2, 4, 12));
  EXPECT_THAT(AllowedWorldSizes(6), ElementsAre(1, 2, 6));
  for (int64_t k = 1; k <= 96; ++k) {
    std::vector<int64_t> rule;
    for (int64_t w = 1; w <= k; w *= 2) {
      if (k % w == 0 && w != k) rule.push_back(w);
    }
    rule.push_back(k);
    EXPECT_EQ(AllowedWorldSizes(k), rule) << "K = " << k;
  }
}

TEST(CheckVirtualWorldTest, NamesBothAndWhatWorks) {
  EXPECT_TRUE(CheckVirtualWorld(8, 4).ok());
  EXPECT_TRUE(CheckVirtualWorld(12, 12).ok());
  EXPECT_EQ(CheckVirtualWorld(12, 3),
            absl::InvalidArgumentError(
                "--virtual_world=12 at 3 ranks: the ranks must split the 12 "
                "virtual ranks along the fixed summation tree (each rank an "
                "equal, whole subtree); use 1, 2, 4 or 12 ranks, or "
                "--virtual_world=3 at 3 ranks"));
  EXPECT_THAT(std::string(CheckVirtualWorld(8, 16).message()),
              ::testing::EndsWith("use 1, 2, 4 or 8 ranks, or a "
                                  "--virtual_world that is a multiple of 16 "
                                  "at 16 ranks"));
  EXPECT_EQ(CheckVirtualWorld(0, 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TreeAccumulatorTest, SameBitsAsTheWholeTree) {
  for (int64_t n = 1; n <= 20; ++n) {
    for (int64_t count : {0, 1, 300}) {
      const auto leaves = Leaves(n, count);
      EXPECT_EQ(Accumulated(leaves, count), TreeOf(leaves, count)) << n;
    }
  }
}

TEST(TreeAccumulatorTest, RanksComposeAtEveryAllowedWorldSize) {
  constexpr int64_t kCount = 257;
  for (int64_t k : {8, 12, 24}) {
    const auto leaves = Leaves(k, kCount);
    const std::vector<float> whole = TreeOf(leaves, kCount);
    for (int64_t w : AllowedWorldSizes(k)) {
      std::vector<std::vector<float>> partials;
      for (int64_t r = 0; r < w; ++r) {
        partials.push_back(Accumulated(
            std::vector<std::vector<float>>(leaves.begin() + r * k / w,
                                            leaves.begin() + (r + 1) * k / w),
            kCount));
      }
      EXPECT_EQ(TreeOf(partials, kCount), whole) << k << " at " << w;
    }
  }
}

// A leaf given in pieces (a model's gradients, parameter by parameter,
// read where they lie) sums as the whole leaf; pieces that do not add up to
// the count are refused; mutable_result is the same sum.
TEST(TreeAccumulatorTest, PiecesSumAsTheWholeLeaf) {
  constexpr int64_t kCount = 300;
  for (int64_t n : {1, 2, 5, 8}) {
    const auto leaves = Leaves(n, kCount);
    absl::StatusOr<TreeAccumulator> acc =
        TreeAccumulator::Create(n, DType::kF32, kCount);
    ASSERT_TRUE(acc.ok());
    for (const auto& l : leaves) {
      // Three pieces of 7, 0 and 293 elements.
      const TreeAccumulator::Piece pieces[] = {
          {l.data(), 7}, {l.data() + 7, 0}, {l.data() + 7, kCount - 7}};
      ASSERT_TRUE(acc->AddPieces(pieces).ok());
    }
    absl::StatusOr<void*> sum = acc->mutable_result();
    ASSERT_TRUE(sum.ok()) << sum.status();
    const float* f = static_cast<const float*>(*sum);
    EXPECT_EQ(std::vector<float>(f, f + kCount), TreeOf(leaves, kCount)) << n;
  }
  absl::StatusOr<TreeAccumulator> acc =
      TreeAccumulator::Create(2, DType::kF32, 4);
  ASSERT_TRUE(acc.ok());
  const float x[4] = {1, 2, 3, 4};
  const TreeAccumulator::Piece short_leaf[] = {{x, 3}};
  EXPECT_EQ(acc->AddPieces(short_leaf).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(acc->mutable_result().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Leaves written into the accumulator's own buffers: no copy, the same
// bits, at most depth + 2 buffers (one per level and the next leaf's), all
// from the caller's allocator, and the result's buffer is the next step's
// first leaf buffer (the virtual world keeps gradients bound there).
TEST(TreeAccumulatorTest, LeavesWrittenInPlaceSumAsTheWholeTree) {
  const int64_t count = 37;
  for (int64_t n = 1; n <= 9; ++n) {
    const std::vector<std::vector<float>> leaves = Leaves(n, count);
    std::vector<std::unique_ptr<float[]>> given;
    absl::StatusOr<TreeAccumulator> acc = TreeAccumulator::Create(
        n, DType::kF32, count, [&](int64_t bytes) -> absl::StatusOr<void*> {
          EXPECT_EQ(bytes, count * 4);
          given.push_back(std::make_unique<float[]>(count));
          return static_cast<void*>(given.back().get());
        });
    ASSERT_TRUE(acc.ok());
    for (int step = 0; step < 2; ++step) {
      for (int64_t l = 0; l < n; ++l) {
        if (l == 2 && step == 1) {
          // A leaf read from the caller's memory mixes with written ones.
          ASSERT_TRUE(acc->Add(leaves[l].data()).ok());
          continue;
        }
        absl::StatusOr<void*> buf = acc->NextLeafBuffer();
        ASSERT_TRUE(buf.ok());
        std::memcpy(*buf, leaves[l].data(), count * sizeof(float));
        ASSERT_TRUE(acc->AddWritten().ok()) << n << " " << l;
      }
      const float* sum = static_cast<const float*>(*acc->result());
      EXPECT_EQ(std::vector<float>(sum, sum + count), TreeOf(leaves, count))
          << n << " leaves, step " << step;
      int64_t depth = 0;
      while ((int64_t{1} << depth) < n) ++depth;
      EXPECT_LE(static_cast<int64_t>(given.size()), depth + 2) << n;
      acc->Reset();
      EXPECT_EQ(*acc->NextLeafBuffer(), static_cast<const void*>(sum));
    }
  }
  absl::StatusOr<TreeAccumulator> acc =
      TreeAccumulator::Create(1, DType::kF32, 1);
  EXPECT_EQ(acc->AddWritten().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TreeAccumulatorTest, ResetAndMisuse) {
  absl::StatusOr<TreeAccumulator> acc =
      TreeAccumulator::Create(3, DType::kF64, 2);
  ASSERT_TRUE(acc.ok());
  const double a[] = {1, 2}, b[] = {3, 4}, c[] = {5, 6};
  ASSERT_TRUE(acc->Add(a).ok());
  EXPECT_EQ(acc->result().status(),
            absl::FailedPreconditionError(
                "TreeAccumulator: 1 of 3 leaves added; the sum is not "
                "complete"));
  ASSERT_TRUE(acc->Add(b).ok());
  ASSERT_TRUE(acc->Add(c).ok());
  EXPECT_EQ(acc->Add(c).code(), absl::StatusCode::kFailedPrecondition);
  const double* sum = static_cast<const double*>(*acc->result());
  EXPECT_EQ(sum[0], 9);
  EXPECT_EQ(sum[1], 12);
  acc->Reset();
  ASSERT_TRUE(acc->Add(c).ok());
  ASSERT_TRUE(acc->Add(c).ok());
  ASSERT_TRUE(acc->Add(c).ok());
  EXPECT_EQ(static_cast<const double*>(*acc->result())[0], 15);
  EXPECT_EQ(TreeAccumulator::Create(0, DType::kF32, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TreeAccumulator::Create(2, DType::kBF16, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
