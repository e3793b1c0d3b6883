#include "train/checkpoint/sharded_checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/options.h"
#include "sim/sim.h"
#include "tensor/tensor.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

// The full state of the tests: "w" (2 x 5 f32: element i is base + i),
// "b" (3 f32) and "step" (an i64 scalar, base).
constexpr int64_t kW = 10;

std::vector<float> WValues(float base) {
  std::vector<float> v(kW);
  for (int64_t i = 0; i < kW; ++i) v[i] = base + static_cast<float>(i);
  return v;
}

// ZeRO's shard k of n over kW elements: [k s, min((k + 1) s, kW)).
std::pair<int64_t, int64_t> ShardOf(int64_t k, int64_t n) {
  const int64_t s = (kW + n - 1) / n;
  return {std::min(kW, k * s), std::min(kW, (k + 1) * s)};
}

// What rank `rank` of `world` holds: its shard of "w"; rank 0 also "b" and
// "step". `corrupt`: the rank's "w" slice claims one element too many.
absl::StatusOr<std::vector<OwnedSlice>> Owned(int rank, int world, float base,
                                              bool corrupt = false) {
  std::vector<OwnedSlice> out;
  const auto [lo, hi] = ShardOf(rank, world);
  if (hi > lo) {
    const std::vector<float> w = WValues(base);
    TANDEM_ASSIGN_OR_RETURN(Tensor t, Tensor::FromVector(std::vector<float>(
                                          w.begin() + lo, w.begin() + hi)));
    out.push_back({"w", DType::kF32, {2, 5}, lo, hi + (corrupt ? 1 : 0), t});
  }
  if (rank == 0) {
    TANDEM_ASSIGN_OR_RETURN(
        Tensor b, Tensor::FromVector(std::vector<float>{-base, 0.25f, base}));
    out.push_back({"b", DType::kF32, {3}, 0, 3, b});
    TANDEM_ASSIGN_OR_RETURN(
        Tensor step,
        Tensor::FromVector(std::vector<int64_t>{static_cast<int64_t>(base)},
                           Shape{}));
    out.push_back({"step", DType::kI64, {}, 0, 1, step});
  }
  return out;
}

class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/sharded_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    mkdir(dir_.c_str(), 0755);
  }

  // Every rank's status of one save at `world` ranks.
  std::vector<absl::Status> Save(int world, int64_t step, float base,
                                 int corrupt_rank = -1,
                                 std::vector<sim::Fault> faults = {}) {
    sim::Options options;
    options.faults = std::move(faults);
    sim::RunResult r = sim::Run(
        world,
        [&](int rank, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(
              std::vector<OwnedSlice> mine,
              Owned(rank, world, base, rank == corrupt_rank));
          return SaveShardedCheckpoint(
              comm, Device::CPU(), dir_, step, mine,
              {{"tandem.global_step", absl::StrCat(step)}});
        },
        options);
    return r.ranks;
  }

  // "w" as ranks of a world of `world` read it back, shard by shard.
  std::vector<float> ReadW(int world) {
    absl::StatusOr<ShardIndex> index = ReadShardIndex(dir_);
    EXPECT_TRUE(index.ok()) << index.status();
    if (!index.ok()) return {};
    std::vector<float> w;
    for (int k = 0; k < world; ++k) {
      const auto [lo, hi] = ShardOf(k, world);
      absl::StatusOr<std::vector<Tensor>> got =
          LoadShardedSlices(dir_, *index, {{"w", lo, hi}});
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return {};
      const float* f = (*got)[0].data<float>();
      w.insert(w.end(), f, f + (hi - lo));
    }
    return w;
  }

  std::vector<std::string> Shards() const {
    std::vector<std::string> out;
    DIR* d = opendir(dir_.c_str());
    while (dirent* e = readdir(d)) {
      if (absl::StartsWith(e->d_name, "shard-")) out.push_back(e->d_name);
    }
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
};

TEST_F(ShardedCheckpointTest, SavedAtFourReadsBackAtThreeTwoAndOne) {
  for (const absl::Status& s : Save(4, 7, 100.0f)) ASSERT_TRUE(s.ok()) << s;
  absl::StatusOr<ShardIndex> index = ReadShardIndex(dir_);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->metadata.at("tandem.global_step"), "7");
  EXPECT_EQ(index->files.size(), 4u);  // every rank wrote its own
  EXPECT_EQ(index->tensors.at("w").slices.size(), 4u);
  EXPECT_EQ(Shards().size(), 4u);
  for (int world : {3, 2, 1}) EXPECT_EQ(ReadW(world), WValues(100.0f)) << world;
  absl::StatusOr<std::vector<Tensor>> rest =
      LoadShardedSlices(dir_, *index, {{"b", 1, 3}, {"step", 0, 1}});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ((*rest)[0].ToVector<float>().value(),
            (std::vector<float>{0.25f, 100.0f}));
  EXPECT_EQ((*rest)[1].ToVector<int64_t>().value(),
            (std::vector<int64_t>{100}));
}

TEST_F(ShardedCheckpointTest, TheNextSaveReplacesItAndRemovesItsShards) {
  for (const absl::Status& s : Save(4, 7, 100.0f)) ASSERT_TRUE(s.ok()) << s;
  const std::vector<std::string> first = Shards();
  for (const absl::Status& s : Save(2, 8, 200.0f)) ASSERT_TRUE(s.ok()) << s;
  const std::vector<std::string> second = Shards();
  ASSERT_EQ(second.size(), 2u);
  for (const std::string& f : second) {
    EXPECT_EQ(std::count(first.begin(), first.end(), f), 0) << f;
  }
  EXPECT_EQ(ReadShardIndex(dir_)->metadata.at("tandem.global_step"), "8");
  EXPECT_EQ(ReadW(3), WValues(200.0f));
}

TEST_F(ShardedCheckpointTest, AFailedSaveLeavesThePreviousCheckpoint) {
  for (const absl::Status& s : Save(4, 7, 100.0f)) ASSERT_TRUE(s.ok()) << s;
  // Rank 2's slice does not match its data: every rank fails, naming it.
  for (const absl::Status& s : Save(4, 8, 200.0f, /*corrupt_rank=*/2)) {
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("was not committed (the previous one "
                                       "stays): sharded checkpoint: rank 2 "
                                       "could not write its shard"));
  }
  EXPECT_EQ(ReadShardIndex(dir_)->metadata.at("tandem.global_step"), "7");
  EXPECT_EQ(ReadW(4), WValues(100.0f));
  // Rank 1 dies after writing its shard (sim fails it at the gather of the
  // ranks' reports, its collective 1): no index is written.
  std::vector<absl::Status> killed =
      Save(4, 9, 300.0f, -1, {sim::Fault::FailAt(1, 1)});
  for (const absl::Status& s : killed) EXPECT_FALSE(s.ok());
  EXPECT_EQ(ReadShardIndex(dir_)->metadata.at("tandem.global_step"), "7");
  EXPECT_EQ(ReadW(2), WValues(100.0f));
  // The next good save commits and sweeps the failed saves' shards.
  for (const absl::Status& s : Save(2, 10, 400.0f)) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Shards().size(), 2u);
  EXPECT_EQ(ReadW(1), WValues(400.0f));
}

TEST_F(ShardedCheckpointTest, SlicesThatDoNotTileATensorAreNotCommitted) {
  // Every rank claims the whole of "w": the slices overlap.
  sim::RunResult r =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(Tensor w, Tensor::FromVector(WValues(1.0f)));
        std::vector<OwnedSlice> mine = {{"w", DType::kF32, {2, 5}, 0, kW, w}};
        return SaveShardedCheckpoint(comm, Device::CPU(), dir_, 1, mine, {});
      });
  for (const absl::Status& s : r.ranks) {
    EXPECT_THAT(s.message(), HasSubstr("does not follow on from element 10"));
  }
  EXPECT_EQ(ReadShardIndex(dir_).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::train::checkpoint
