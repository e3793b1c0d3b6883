#include "train/checkpoint/reshard_plan.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

// A tensor of 10 f32 elements saved by 4 ranks in ZeRO's shards of
// ceil(10 / 4) = 3 (the last rank holds 1), each rank's slice at byte 40 of
// its own file.
ShardIndex SavedAtFour() {
  ShardIndex index;
  const int64_t ends[] = {3, 6, 9, 10};
  int64_t begin = 0;
  IndexTensor t{DType::kF32, {10}, {}};
  for (int r = 0; r < 4; ++r) {
    const std::string file = "shard-" + std::to_string(r) + ".safetensors";
    index.files[file] = 40 + 4 * (ends[r] - begin);
    t.slices.push_back({begin, ends[r], file, 40});
    begin = ends[r];
  }
  index.tensors["w"] = t;
  return index;
}

TEST(ReshardPlanTest, ThreeRanksReadOnlyTheBytesOfTheirShards) {
  const ShardIndex index = SavedAtFour();
  // At three ranks, shards of ceil(10 / 3) = 4: [0, 4), [4, 8), [8, 10).
  const std::vector<std::vector<PlannedRead>> want = {
      {{"shard-0.safetensors", 40, 12, 0, 0},
       {"shard-1.safetensors", 40, 4, 0, 3}},
      {{"shard-1.safetensors", 44, 8, 0, 0},
       {"shard-2.safetensors", 40, 8, 0, 2}},
      {{"shard-2.safetensors", 48, 4, 0, 0},
       {"shard-3.safetensors", 40, 4, 0, 1}}};
  for (int r = 0; r < 3; ++r) {
    const SliceRequest need{"w", 4 * r, std::min<int64_t>(10, 4 * r + 4)};
    absl::StatusOr<std::vector<PlannedRead>> reads =
        PlanReads(index, {need}, "ckpt");
    ASSERT_TRUE(reads.ok()) << reads.status();
    ASSERT_EQ(reads->size(), want[r].size()) << r;
    int64_t bytes = 0;
    for (size_t i = 0; i < reads->size(); ++i) {
      const PlannedRead& got = (*reads)[i];
      EXPECT_EQ(got.file, want[r][i].file) << r << " " << i;
      EXPECT_EQ(got.file_offset, want[r][i].file_offset) << r << " " << i;
      EXPECT_EQ(got.bytes, want[r][i].bytes) << r << " " << i;
      EXPECT_EQ(got.dest_element, want[r][i].dest_element) << r << " " << i;
      bytes += got.bytes;
    }
    EXPECT_EQ(bytes, 4 * (need.end - need.begin)) << r;  // nothing more
  }
}

TEST(ReshardPlanTest, OneRankReadsEverythingAndMergesWhatFollowsInAFile) {
  ShardIndex index = SavedAtFour();
  // Rank 0's file also holds the slice after its own, right behind it.
  index.tensors["w"].slices[1] = {3, 6, "shard-0.safetensors", 52};
  index.files["shard-0.safetensors"] = 64;
  absl::StatusOr<std::vector<PlannedRead>> reads =
      PlanReads(index, {{"w", 0, 10}, {"w", 5, 5}}, "ckpt");
  ASSERT_TRUE(reads.ok()) << reads.status();
  ASSERT_EQ(reads->size(), 3u);  // [0, 6) in one read, then two files
  EXPECT_EQ((*reads)[0].bytes, 24);
  EXPECT_EQ((*reads)[1].file, "shard-2.safetensors");
  EXPECT_EQ((*reads)[1].dest_element, 6);
  EXPECT_EQ((*reads)[2].dest_element, 9);
}

TEST(ReshardPlanTest, RefusesWhatTheIndexDoesNotHold) {
  const ShardIndex index = SavedAtFour();
  EXPECT_THAT(
      PlanReads(index, {{"v", 0, 1}}, "ckpt/index.json").status().message(),
      HasSubstr("checkpoint index ckpt/index.json holds no tensor "
                "\"v\""));
  EXPECT_THAT(PlanReads(index, {{"w", 4, 11}}, "ckpt").status().message(),
              HasSubstr("elements [4, 11) of tensor \"w\" were asked for; it "
                        "has 10"));
  EXPECT_EQ(PlanReads(index, {{"w", -1, 2}}, "ckpt").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train::checkpoint
