#include "train/data/distributed_sampler.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct PinnedCase {
  int64_t size, replicas, rank;
  uint64_t seed;
  int64_t epoch;
  bool shuffle, drop_last;
  std::vector<int64_t> expected;
};

// Produced by PyTorch 1.13 (Debian python3-torch):
//   s = DistributedSampler(list(range(n)), num_replicas=R, rank=k,
//                          shuffle=sh, seed=seed, drop_last=dl)
//   s.set_epoch(ep); print(list(s))
// bench/peers/check_sampler.py re-checks many more cases against the CLI.
const std::vector<PinnedCase>& PinnedCases() {
  static const auto* cases = new std::vector<PinnedCase>{
      {10, 3, 0, 0, 0, true, false, {4, 5, 0, 2}},
      {10, 3, 2, 0, 0, true, false, {7, 9, 6, 1}},
      {10, 3, 1, 0, 1, true, true, {6, 0, 3}},
      {5, 2, 1, 0, 0, true, false, {0, 3, 4}},
      {7, 4, 3, 42, 5, true, false, {1, 5}},
      {2, 5, 4, 0, 0, true, false, {0}},
      {2, 5, 1, 0, 0, false, false, {1}},
      {11, 4, 2, 7, 3, true, true, {8, 2}},
      {100,
       8,
       5,
       123,
       2,
       true,
       false,
       {88, 78, 18, 39, 3, 46, 36, 38, 70, 92, 25, 86, 93}},
      {3, 8, 7, 0, 0, true, true, {}},
      {0, 2, 1, 0, 0, true, false, {}},
      {13, 4, 0, 0, 0, false, true, {0, 4, 8}},
  };
  return *cases;
}

TEST(DistributedSamplerTest, MatchesPyTorchExactly) {
  for (const PinnedCase& c : PinnedCases()) {
    absl::StatusOr<DistributedSampler> sampler =
        DistributedSampler::Create(c.size, {.num_replicas = c.replicas,
                                            .rank = c.rank,
                                            .shuffle = c.shuffle,
                                            .seed = c.seed,
                                            .drop_last = c.drop_last});
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    sampler->SetEpoch(c.epoch);
    EXPECT_THAT(sampler->Indices(), ElementsAreArray(c.expected))
        << "n=" << c.size << " R=" << c.replicas << " rank=" << c.rank
        << " seed=" << c.seed << " epoch=" << c.epoch;
  }
}

// Collects every rank's indices for one configuration.
std::vector<std::vector<int64_t>> AllShards(int64_t n, int64_t r,
                                            bool drop_last, int64_t epoch) {
  std::vector<std::vector<int64_t>> shards;
  for (int64_t k = 0; k < r; ++k) {
    auto sampler = DistributedSampler::Create(
        n, {.num_replicas = r, .rank = k, .seed = 5, .drop_last = drop_last});
    EXPECT_TRUE(sampler.ok()) << sampler.status();
    sampler->SetEpoch(epoch);
    shards.push_back(sampler->Indices());
  }
  return shards;
}

TEST(DistributedSamplerTest, PaddedShardsCoverEverySampleAndAreEqualLength) {
  for (int64_t n : {1, 2, 7, 10, 64, 101}) {
    for (int64_t r : {1, 2, 3, 4, 8, 16}) {
      auto shards = AllShards(n, r, /*drop_last=*/false, /*epoch=*/3);
      const int64_t per_rank = (n + r - 1) / r;
      std::map<int64_t, int64_t> seen;
      for (const auto& shard : shards) {
        ASSERT_EQ(static_cast<int64_t>(shard.size()), per_rank);
        for (int64_t index : shard) {
          ASSERT_GE(index, 0);
          ASSERT_LT(index, n);
          ++seen[index];
        }
      }
      // Every sample appears; only the padding (per_rank * r - n of them)
      // appears twice or more.
      EXPECT_EQ(static_cast<int64_t>(seen.size()), n)
          << "n=" << n << " r=" << r;
      int64_t extra = 0;
      for (const auto& [index, count] : seen) extra += count - 1;
      EXPECT_EQ(extra, per_rank * r - n);
    }
  }
}

TEST(DistributedSamplerTest, DropLastShardsAreDisjoint) {
  for (int64_t n : {1, 2, 7, 10, 64, 101}) {
    for (int64_t r : {1, 2, 3, 4, 8}) {
      auto shards = AllShards(n, r, /*drop_last=*/true, /*epoch=*/0);
      std::set<int64_t> seen;
      int64_t total = 0;
      for (const auto& shard : shards) {
        ASSERT_EQ(shard.size(), shards[0].size());
        total += static_cast<int64_t>(shard.size());
        seen.insert(shard.begin(), shard.end());
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), total) << "duplicates";
      EXPECT_EQ(total, (n / r) * r) << "n=" << n << " r=" << r;
    }
  }
}

TEST(DistributedSamplerTest, PaddingRepeatsTheWholeListWhenShorterThanPadding) {
  // n=2, R=7: the global order is [a, b] padded to 7 as a,b,a,b,a,b,a.
  auto shards = AllShards(2, 7, /*drop_last=*/false, /*epoch=*/0);
  std::vector<int64_t> global;
  for (const auto& shard : shards) global.push_back(shard.at(0));
  EXPECT_EQ(global[0], global[2]);
  EXPECT_EQ(global[0], global[6]);
  EXPECT_EQ(global[1], global[5]);
  EXPECT_NE(global[0], global[1]);
}

TEST(DistributedSamplerTest, EpochChangesTheOrderAndIsReproducible) {
  auto sampler = DistributedSampler::Create(50, {.num_replicas = 2, .rank = 0});
  ASSERT_TRUE(sampler.ok());
  const std::vector<int64_t> epoch0 = sampler->Indices();
  EXPECT_EQ(sampler->Indices(), epoch0) << "no SetEpoch: same order again";
  sampler->SetEpoch(1);
  const std::vector<int64_t> epoch1 = sampler->Indices();
  EXPECT_NE(epoch1, epoch0);
  sampler->SetEpoch(0);
  EXPECT_EQ(sampler->Indices(), epoch0);
  // seed + epoch is what matters: seed 1 epoch 0 == seed 0 epoch 1.
  auto shifted =
      DistributedSampler::Create(50, {.num_replicas = 2, .rank = 0, .seed = 1});
  ASSERT_TRUE(shifted.ok());
  EXPECT_EQ(shifted->Indices(), epoch1);
}

TEST(DistributedSamplerTest, NoShuffleIsStrided) {
  auto sampler = DistributedSampler::Create(
      10, {.num_replicas = 4, .rank = 1, .shuffle = false});
  ASSERT_TRUE(sampler.ok());
  EXPECT_THAT(sampler->Indices(), ElementsAreArray({1, 5, 9}));
  EXPECT_EQ(sampler->num_samples(), 3);
  EXPECT_EQ(sampler->total_size(), 12);
}

TEST(DistributedSamplerTest, RejectsBadArguments) {
  auto bad_rank =
      DistributedSampler::Create(10, {.num_replicas = 2, .rank = 2});
  EXPECT_EQ(bad_rank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_rank.status().message(), HasSubstr("rank must be in [0, 1]"));
  EXPECT_THAT(bad_rank.status().message(), HasSubstr("got 2"));

  auto negative_rank =
      DistributedSampler::Create(10, {.num_replicas = 2, .rank = -1});
  EXPECT_EQ(negative_rank.status().code(), absl::StatusCode::kInvalidArgument);

  auto no_replicas = DistributedSampler::Create(10, {.num_replicas = 0});
  EXPECT_THAT(no_replicas.status().message(),
              HasSubstr("num_replicas (the world size) must be >= 1, got 0"));

  auto negative_size = DistributedSampler::Create(-3, {.num_replicas = 1});
  EXPECT_THAT(negative_size.status().message(),
              HasSubstr("dataset size must be >= 0, got -3"));
}

// A world far larger than the data set pads by cycling the order; the
// sampler must not build the padded order (2^31 entries here: 16 GiB).
TEST(DistributedSamplerTest, HugeWorldPadsWithoutMaterialisingTheOrder) {
  auto huge =
      DistributedSampler::Create(10, {.num_replicas = 2147483647, .rank = 5});
  ASSERT_TRUE(huge.ok()) << huge.status();
  EXPECT_EQ(huge->num_samples(), 1);
  // Position 5 of the (unpadded) shuffled order, the same as rank 1 of 4.
  auto rank1 = DistributedSampler::Create(10, {.num_replicas = 4, .rank = 1});
  EXPECT_EQ(huge->Indices()[0], rank1->Indices()[1]);
  // Padding that cycles more than once: 3 samples over 8 ranks.
  auto cycle = DistributedSampler::Create(
      3, {.num_replicas = 8, .rank = 7, .shuffle = false});
  EXPECT_THAT(cycle->Indices(), ElementsAreArray({1}));  // position 7 % 3
  auto max = DistributedSampler::Create(
      10, {.num_replicas = INT64_MAX, .rank = INT64_MAX - 1});
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->num_samples(), 1);
  EXPECT_EQ(max->Indices().size(), 1u);
}

TEST(DistributedSamplerTest, RefusesADataSetLargerThanMemoryWithTheFigure) {
  auto too_big = DistributedSampler::Create(INT64_MAX, {.num_replicas = 1});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(),
              HasSubstr("dataset size 9223372036854775807"));
  EXPECT_THAT(too_big.status().message(), HasSubstr("GiB"));
}

}  // namespace
}  // namespace tandem::train
