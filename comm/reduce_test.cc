#include "comm/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "base/half.h"
#include "comm/tree_sum_reference.h"
#include "comm/types.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

// Serial reference: combine in order, exactly as the contract states.
template <typename T, typename Op>
std::vector<T> Serial(const std::vector<std::vector<T>>& in, Op op) {
  std::vector<T> out = in[0];
  for (size_t r = 1; r < in.size(); ++r) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = op(out[i], in[r][i]);
  }
  return out;
}

template <typename T>
absl::Status ReduceVectors(DType dtype, ReduceOp op,
                           std::vector<std::vector<T>>& bufs, int64_t divisor) {
  std::vector<const void*> srcs;
  std::vector<void*> dsts;
  for (auto& b : bufs) {
    srcs.push_back(b.data());
    dsts.push_back(b.data());
  }
  return ReduceInto(dtype, op, static_cast<int64_t>(bufs[0].size()), srcs, dsts,
                    divisor);
}

TEST(ReduceTest, FloatSumIsTheSerialLoopBitForBit) {
  // Random values whose sums round: the order of combination matters, and the
  // kernel must use rank order (not a tree) at every index, in every block.
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  const int n = 5;
  const int64_t count = 5000;  // more than two blocks
  std::vector<std::vector<float>> bufs(n, std::vector<float>(count));
  for (auto& b : bufs) {
    for (float& x : b) x = dist(gen) * std::pow(10.0f, float(gen() % 7) - 3);
  }
  const std::vector<float> expected =
      Serial(bufs, [](float a, float b) { return a + b; });
  ASSERT_TRUE(ReduceVectors(DType::kF32, ReduceOp::kSum, bufs, n).ok());
  for (const auto& b : bufs) {
    ASSERT_EQ(std::memcmp(b.data(), expected.data(), count * sizeof(float)), 0);
  }
}

// Two f32 sources of at most 16 elements take a loop of their own: the same
// bits as the serial loop, in place on both and into one destination, at
// every count up to the limit and just past it.
TEST(ReduceTest, SmallTwoSourceSumIsTheSerialLoop) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (int64_t count = 1; count <= 17; ++count) {
    std::vector<std::vector<float>> bufs(2, std::vector<float>(count));
    for (auto& b : bufs) {
      for (float& x : b) x = dist(gen) * std::pow(10.0f, float(gen() % 7) - 3);
    }
    const std::vector<float> expected =
        Serial(bufs, [](float a, float b) { return a + b; });
    std::vector<float> out(count, -1.0f);
    const void* srcs[] = {bufs[0].data(), bufs[1].data()};
    void* one[] = {out.data()};
    ASSERT_TRUE(
        ReduceInto(DType::kF32, ReduceOp::kSum, count, srcs, one, 2).ok());
    EXPECT_EQ(std::memcmp(out.data(), expected.data(), count * sizeof(float)),
              0)
        << count;
    ASSERT_TRUE(ReduceVectors(DType::kF32, ReduceOp::kSum, bufs, 2).ok());
    for (const auto& b : bufs) {
      EXPECT_EQ(std::memcmp(b.data(), expected.data(), count * sizeof(float)),
                0)
          << count;
    }
  }
}

TEST(ReduceTest, AvgDividesTheSumOnce) {
  std::vector<std::vector<double>> bufs = {{1.0, 0.1}, {2.0, 0.2}, {4.0, 0.4}};
  ASSERT_TRUE(ReduceVectors(DType::kF64, ReduceOp::kAvg, bufs, 3).ok());
  EXPECT_EQ(bufs[0][0], 7.0 / 3.0);
  EXPECT_EQ(bufs[2][1], ((0.1 + 0.2) + 0.4) / 3.0);
}

TEST(ReduceTest, MaxMinProdAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> bufs = {{1, -2, nan, 3}, {5, -7, 1, nan}};
  auto max = bufs, min = bufs, prod = bufs;
  ASSERT_TRUE(ReduceVectors(DType::kF32, ReduceOp::kMax, max, 2).ok());
  ASSERT_TRUE(ReduceVectors(DType::kF32, ReduceOp::kMin, min, 2).ok());
  ASSERT_TRUE(ReduceVectors(DType::kF32, ReduceOp::kProd, prod, 2).ok());
  EXPECT_EQ(max[1][0], 5);
  EXPECT_EQ(max[1][1], -2);
  EXPECT_TRUE(std::isnan(max[0][2]));
  EXPECT_TRUE(std::isnan(max[0][3]));
  EXPECT_EQ(min[0][1], -7);
  EXPECT_TRUE(std::isnan(min[1][2]));
  EXPECT_TRUE(std::isnan(min[1][3]));
  EXPECT_EQ(prod[0][1], 14);
}

TEST(ReduceTest, HalfTypesAccumulateInF32AndRoundOnce) {
  // 2048 + 1 + 1 in f16: pairwise rounding in f16 would give 2048 (2049 is
  // not representable; ties to even), f32 accumulation gives 2050 exactly.
  std::vector<std::vector<uint16_t>> f16 = {{half::F16FromF32(2048.0f)},
                                            {half::F16FromF32(1.0f)},
                                            {half::F16FromF32(1.0f)}};
  ASSERT_TRUE(ReduceVectors(DType::kF16, ReduceOp::kSum, f16, 3).ok());
  EXPECT_EQ(half::F32FromF16(f16[0][0]), 2050.0f);
  EXPECT_EQ(f16[1][0], f16[0][0]);
  // bf16: 256 + 1 + 1 -> 258.
  std::vector<std::vector<uint16_t>> bf16 = {{half::BF16FromF32(256.0f)},
                                             {half::BF16FromF32(1.0f)},
                                             {half::BF16FromF32(1.0f)}};
  ASSERT_TRUE(ReduceVectors(DType::kBF16, ReduceOp::kSum, bf16, 3).ok());
  EXPECT_EQ(half::F32FromBF16(bf16[2][0]), 258.0f);
  // Avg: (1 + 2) / 2 = 1.5, divided in f32 then rounded.
  std::vector<std::vector<uint16_t>> avg = {{half::F16FromF32(1.0f)},
                                            {half::F16FromF32(2.0f)}};
  ASSERT_TRUE(ReduceVectors(DType::kF16, ReduceOp::kAvg, avg, 2).ok());
  EXPECT_EQ(half::F32FromF16(avg[0][0]), 1.5f);
}

TEST(ReduceTest, IntegersWrapAndCompareWithSign) {
  std::vector<std::vector<int32_t>> i32 = {
      {std::numeric_limits<int32_t>::max(), -5, 3}, {1, 7, -4}};
  auto sum = i32, max = i32, prod = i32;
  ASSERT_TRUE(ReduceVectors(DType::kI32, ReduceOp::kSum, sum, 2).ok());
  ASSERT_TRUE(ReduceVectors(DType::kI32, ReduceOp::kMax, max, 2).ok());
  ASSERT_TRUE(ReduceVectors(DType::kI32, ReduceOp::kProd, prod, 2).ok());
  EXPECT_EQ(sum[0][0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(sum[0][1], 2);
  EXPECT_EQ(max[1][1], 7);
  EXPECT_EQ(max[1][2], 3);
  EXPECT_EQ(prod[0][2], -12);
  std::vector<std::vector<uint8_t>> u8 = {{250, 200}, {10, 100}};
  auto u8max = u8;
  ASSERT_TRUE(ReduceVectors(DType::kU8, ReduceOp::kSum, u8, 2).ok());
  ASSERT_TRUE(ReduceVectors(DType::kU8, ReduceOp::kMax, u8max, 2).ok());
  EXPECT_EQ(u8[0][0], 4);  // 260 mod 256
  EXPECT_EQ(u8max[0][1], 200);
  std::vector<std::vector<int64_t>> i64 = {{-3}, {-9}};
  ASSERT_TRUE(ReduceVectors(DType::kI64, ReduceOp::kMin, i64, 2).ok());
  EXPECT_EQ(i64[0][0], -9);
}

TEST(ReduceTest, SeparateDestinations) {
  std::vector<float> a = {1, 2}, b = {10, 20}, out(2, 0), out2(2, 0);
  const void* srcs[] = {a.data(), b.data()};
  void* dsts[] = {out.data(), out2.data()};
  ASSERT_TRUE(ReduceInto(DType::kF32, ReduceOp::kSum, 2, srcs, dsts, 2).ok());
  EXPECT_EQ(out, (std::vector<float>{11, 22}));
  EXPECT_EQ(out2, out);
  EXPECT_EQ(a, (std::vector<float>{1, 2}));
}

// Two sources take a one-pass path (a 2-rank all-reduce): the same bits as
// the serial loop, in place onto either source (crossed too: each
// destination is the other source), with one destination, for every length
// around the vector width.
TEST(ReduceTest, TwoSourcesInPlaceCrossedAndSingleDestination) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (int64_t count : {1, 3, 7, 8, 9, 17, 31, 64, 1000, 5001}) {
    std::vector<float> a(count), b(count);
    for (float& x : a) x = dist(gen) * std::pow(10.0f, float(gen() % 7) - 3);
    for (float& x : b) x = dist(gen) * std::pow(10.0f, float(gen() % 7) - 3);
    std::vector<float> avg(count), mx(count);
    for (int64_t i = 0; i < count; ++i) {
      avg[i] = (a[i] + b[i]) / 2.0f;
      mx[i] = std::max(a[i], b[i]);
    }
    // Crossed: dst0 is b's memory, dst1 is a's.
    std::vector<float> x = a, y = b;
    const void* srcs[] = {x.data(), y.data()};
    void* crossed[] = {y.data(), x.data()};
    ASSERT_TRUE(
        ReduceInto(DType::kF32, ReduceOp::kAvg, count, srcs, crossed, 2).ok());
    ASSERT_EQ(std::memcmp(x.data(), avg.data(), count * sizeof(float)), 0)
        << count;
    ASSERT_EQ(std::memcmp(y.data(), avg.data(), count * sizeof(float)), 0)
        << count;
    // One destination, in place onto the first source.
    x = a;
    y = b;
    void* one[] = {x.data()};
    ASSERT_TRUE(
        ReduceInto(DType::kF32, ReduceOp::kMax, count, srcs, one, 2).ok());
    ASSERT_EQ(std::memcmp(x.data(), mx.data(), count * sizeof(float)), 0)
        << count;
    EXPECT_EQ(y, b) << "a source that is no destination must not change";
  }
}

// Hundreds of destinations (a large simulated cluster): the results are
// streamed past the cache. Every destination, whatever its alignment and
// whatever the length's remainder, holds the serial loop's result; bf16 is
// rounded once per element, the same in every destination.
TEST(ReduceTest, ManyDestinationsGetTheSerialResultAtAnyAlignment) {
  constexpr int kRanks = 300;
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  for (const int64_t count : {int64_t{5}, int64_t{1027}, int64_t{4099}}) {
    for (const int misalign : {0, 4, 8, 12}) {
      // Each buffer starts `misalign` bytes past a 16-byte boundary.
      std::vector<std::vector<float>> storage(
          kRanks, std::vector<float>(static_cast<size_t>(count) + 8));
      std::vector<std::vector<float>> values(
          kRanks, std::vector<float>(static_cast<size_t>(count)));
      std::vector<const void*> srcs;
      std::vector<void*> dsts;
      for (int r = 0; r < kRanks; ++r) {
        char* base = reinterpret_cast<char*>(storage[r].data());
        base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16 + misalign;
        for (float& x : values[r]) x = dist(gen);
        std::memcpy(base, values[r].data(), count * sizeof(float));
        srcs.push_back(base);
        dsts.push_back(base);
      }
      const std::vector<float> expected =
          Serial(values, [](float a, float b) { return a + b; });
      ASSERT_TRUE(
          ReduceInto(DType::kF32, ReduceOp::kSum, count, srcs, dsts, 1).ok());
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(std::memcmp(dsts[r], expected.data(), count * sizeof(float)),
                  0)
            << "count " << count << ", misalign " << misalign << ", rank " << r;
      }
    }
  }
  // bf16: accumulated in f32, rounded once.
  const int64_t count = 2050;
  std::vector<std::vector<uint16_t>> bufs(
      kRanks, std::vector<uint16_t>(static_cast<size_t>(count)));
  std::vector<float> sum(static_cast<size_t>(count), 0.0f);
  for (auto& b : bufs) {
    for (int64_t i = 0; i < count; ++i) {
      b[i] = half::BF16FromF32(dist(gen));
      sum[i] += half::F32FromBF16(b[i]);
    }
  }
  ASSERT_TRUE(ReduceVectors(DType::kBF16, ReduceOp::kSum, bufs, 1).ok());
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(bufs[r][i], half::BF16FromF32(sum[i])) << r << " " << i;
    }
  }
}

TEST(ReduceTest, TreeSumIsTheCanonicalTreeNotRankOrder) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  const int64_t count = 1300;  // past two of the tree's blocks
  for (int n : {1, 2, 3, 5, 6, 8}) {
    std::vector<std::vector<float>> bufs(n, std::vector<float>(count));
    for (auto& b : bufs) {
      for (float& x : b) x = dist(gen) * std::pow(10.0f, float(gen() % 7) - 3);
    }
    std::vector<float> tree(count);
    for (int64_t i = 0; i < count; ++i)
      tree[i] = TreeSumReference<float>(bufs, 0, n, i);
    const std::vector<float> serial =
        Serial(bufs, [](float a, float b) { return a + b; });
    // Rank order and the tree agree up to two sources; from three on these
    // values make them differ somewhere.
    EXPECT_EQ(n <= 2, std::memcmp(tree.data(), serial.data(),
                                  count * sizeof(float)) == 0)
        << n << " sources";
    ASSERT_TRUE(ReduceVectors(DType::kF32, ReduceOp::kTreeSum, bufs, 1).ok());
    for (const auto& b : bufs) {
      ASSERT_EQ(std::memcmp(b.data(), tree.data(), count * sizeof(float)), 0)
          << n << " sources";
    }
  }
}

TEST(ReduceTest, TreeSumOfHalvesIsTheF32TreeRoundedOnce) {
  const int n = 5;
  const int64_t count = 600;
  std::vector<std::vector<uint16_t>> bufs(n, std::vector<uint16_t>(count));
  std::vector<std::vector<float>> wide(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      bufs[r][i] = half::BF16FromF32(0.37f * float((r * 131 + i * 17) % 97) -
                                     float(r == 2 ? 300 : 1));
      wide[r][i] = half::F32FromBF16(bufs[r][i]);
    }
  }
  ASSERT_TRUE(ReduceVectors(DType::kBF16, ReduceOp::kTreeSum, bufs, 1).ok());
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(bufs[0][i],
              half::BF16FromF32(TreeSumReference<float>(wide, 0, n, i)))
        << i;
  }
}

TEST(ReduceTest, BadArguments) {
  std::vector<int32_t> a(4);
  const void* srcs[] = {a.data()};
  void* dsts[] = {a.data()};
  EXPECT_EQ(ReduceInto(DType::kI32, ReduceOp::kAvg, 4, srcs, dsts, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReduceInto(DType::kI32, ReduceOp::kSum, -1, srcs, dsts, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReduceInto(DType::kI32, ReduceOp::kSum, 4, {}, dsts, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ReduceInto(DType::kI32, ReduceOp::kTreeSum, 4, srcs, dsts, 1).code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::comm
