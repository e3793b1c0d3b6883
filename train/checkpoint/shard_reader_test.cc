#include "train/checkpoint/shard_reader.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/checkpoint/reshard_plan.h"
#include "train/checkpoint/shard_index.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

// A folder where two ranks saved a 7-element f32 tensor: rank 0 elements
// [0, 4) at byte 16 of its file, rank 1 [4, 7) at byte 8 of its own; the
// other bytes of each file are filler.
class ShardReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/shard_reader_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    mkdir(dir_.c_str(), 0755);
    for (int i = 0; i < 7; ++i) values_.push_back(0.5f + i);
    Write("r0.safetensors", 16, values_.data(), 4, 4);
    Write("r1.safetensors", 8, values_.data() + 4, 3, 0);
    index_.files = {{"r0.safetensors", 16 + 16 + 4},
                    {"r1.safetensors", 8 + 12}};
    index_.tensors["w"] = {
        DType::kF32,
        {7},
        {{0, 4, "r0.safetensors", 16}, {4, 7, "r1.safetensors", 8}}};
  }

  void Write(const std::string& name, int64_t at, const float* v, int64_t n,
             int64_t tail) {
    std::string bytes(static_cast<size_t>(at), 'x');
    bytes.append(reinterpret_cast<const char*>(v), n * sizeof(float));
    bytes.append(static_cast<size_t>(tail), 'y');
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }

  absl::Status ReadRange(int64_t begin, int64_t end, std::vector<float>& out) {
    const std::vector<SliceRequest> need = {{"w", begin, end}};
    absl::StatusOr<std::vector<PlannedRead>> reads =
        PlanReads(index_, need, dir_);
    if (!reads.ok()) return reads.status();
    out.assign(static_cast<size_t>(end - begin), -1.0f);
    void* dest[] = {out.data()};
    return ReadPlannedShards(dir_, index_, need, *reads, dest);
  }

  std::string dir_;
  std::vector<float> values_;
  ShardIndex index_;
};

TEST_F(ShardReaderTest, ReadsExactlyTheRangesAsked) {
  std::vector<float> got;
  ASSERT_TRUE(ReadRange(0, 7, got).ok());
  EXPECT_EQ(got, values_);
  ASSERT_TRUE(ReadRange(3, 5, got).ok());  // across the two files
  EXPECT_EQ(got, (std::vector<float>{values_[3], values_[4]}));
}

TEST_F(ShardReaderTest, ATruncatedOrReplacedShardIsRefusedNamingIt) {
  Write("r1.safetensors", 8, values_.data() + 4, 2, 0);  // 4 bytes short
  std::vector<float> got;
  absl::Status s = ReadRange(0, 7, got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("r1.safetensors holds 16 bytes; the "
                                     "index says 20 (truncated, or a file of "
                                     "another save)"));
  // A range of the intact file still reads.
  EXPECT_TRUE(ReadRange(0, 4, got).ok());
}

TEST_F(ShardReaderTest, AMissingShardOrAFifoIsRefusedWithoutBlocking) {
  std::remove((dir_ + "/r1.safetensors").c_str());
  std::vector<float> got;
  absl::Status missing = ReadRange(4, 7, got);
  EXPECT_EQ(missing.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(missing.message(), HasSubstr("r1.safetensors cannot be opened"));
  ASSERT_EQ(mkfifo((dir_ + "/r1.safetensors").c_str(), 0644), 0);
  absl::Status fifo = ReadRange(4, 7, got);  // returns: nobody writes it
  EXPECT_THAT(fifo.message(), HasSubstr("is not a regular file"));
}

}  // namespace
}  // namespace tandem::train::checkpoint
