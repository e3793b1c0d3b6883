#include "train/checkpoint/shard_index.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

// A 4 x 3 tensor saved by two ranks (6 elements each, in two files) and a
// scalar in the first file.
ShardIndex TwoRanks() {
  ShardIndex index;
  index.metadata = {{"tandem.global_step", "120"}, {"world_size", "2"}};
  index.files = {{"shard-120-0-of-2.safetensors", 200},
                 {"shard-120-1-of-2.safetensors", 96}};
  index.tensors["fc.weight"] = {DType::kF32,
                                {4, 3},
                                {{0, 6, "shard-120-0-of-2.safetensors", 64},
                                 {6, 12, "shard-120-1-of-2.safetensors", 72}}};
  index.tensors["optimizer.0.step"] = {
      DType::kI64, {}, {{0, 1, "shard-120-0-of-2.safetensors", 88}}};
  return index;
}

TEST(ShardIndexTest, RoundTripsThroughJson) {
  const ShardIndex index = TwoRanks();
  absl::StatusOr<std::string> json = EncodeShardIndex(index);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_THAT(*json, HasSubstr("\"format\": \"tandem-sharded-checkpoint\""));
  EXPECT_THAT(*json,
              HasSubstr("\"fc.weight\": {\"dtype\": \"F32\", \"shape\": [4, "
                        "3], \"slices\": [[0, 6, "
                        "\"shard-120-0-of-2.safetensors\", 64], [6, 12, "
                        "\"shard-120-1-of-2.safetensors\", 72]]}"));
  absl::StatusOr<ShardIndex> back = ParseShardIndex(*json, "dir/index.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata, index.metadata);
  EXPECT_EQ(back->files, index.files);
  ASSERT_EQ(back->tensors.size(), 2u);
  const IndexTensor& w = back->tensors.at("fc.weight");
  EXPECT_EQ(w.dtype, DType::kF32);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{4, 3}));
  ASSERT_EQ(w.slices.size(), 2u);
  EXPECT_EQ(w.slices[1].file, "shard-120-1-of-2.safetensors");
  EXPECT_EQ(w.slices[1].offset, 72);
  EXPECT_EQ(back->tensors.at("optimizer.0.step").numel(), 1);
  // Encoding is deterministic: the same index, the same bytes.
  EXPECT_EQ(*EncodeShardIndex(*back), *json);
}

TEST(ShardIndexTest, RefusesAnIndexThatDoesNotHoldEveryElementOnce) {
  ShardIndex gap = TwoRanks();
  gap.tensors["fc.weight"].slices[1].begin = 7;
  EXPECT_THAT(ValidateShardIndex(gap, "i.json").message(),
              HasSubstr("tensor \"fc.weight\" slice [7, 12) in "
                        "\"shard-120-1-of-2.safetensors\" at byte 72 does not "
                        "follow on from element 6"));
  ShardIndex short_of = TwoRanks();
  short_of.tensors["fc.weight"].slices.pop_back();
  EXPECT_THAT(ValidateShardIndex(short_of, "i.json").message(),
              HasSubstr("slices hold elements [0, 6) of 12"));
  ShardIndex past_file = TwoRanks();
  past_file.files["shard-120-1-of-2.safetensors"] = 80;
  EXPECT_THAT(ValidateShardIndex(past_file, "i.json").message(),
              HasSubstr("ends past the 80 bytes of that file"));
  ShardIndex unlisted = TwoRanks();
  unlisted.tensors["fc.weight"].slices[0].file = "other.safetensors";
  EXPECT_THAT(ValidateShardIndex(unlisted, "i.json").message(),
              HasSubstr("names a file the index does not list"));
  ShardIndex escape = TwoRanks();
  escape.files["../x"] = 8;
  EXPECT_THAT(ValidateShardIndex(escape, "i.json").message(),
              HasSubstr("\"../x\" is not a plain name in the folder"));
  EXPECT_EQ(EncodeShardIndex(gap).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The message ParseShardIndex gives for `json` read from "i".
std::string ParseError(const std::string& json) {
  return std::string(ParseShardIndex(json, "i").status().message());
}

// An index of one tensor "w" in file "f" (8 bytes), given its JSON.
std::string OneTensor(const std::string& tensor) {
  return R"({"format": "tandem-sharded-checkpoint", "version": 1,
             "metadata": {}, "files": {"f": 8}, "tensors": {"w": )" +
         tensor + "}}";
}

TEST(ShardIndexTest, RefusesOtherFilesNamingWhy) {
  EXPECT_THAT(ParseShardIndex("[1]", "a/index.json").status().message(),
              HasSubstr("checkpoint index a/index.json: not a JSON object"));
  EXPECT_THAT(
      ParseError(R"({"format": "x", "version": 1})"),
      HasSubstr("format is \"x\"; expected \"tandem-sharded-checkpoint\""));
  EXPECT_THAT(
      ParseError(R"({"format": "tandem-sharded-checkpoint", "version": 2})"),
      HasSubstr("version 2; this tandem reads version 1"));
  EXPECT_THAT(
      ParseError(OneTensor(R"({"dtype": "Q8", "shape": [2], "slices": []})")),
      HasSubstr("tensor \"w\" has dtype \"Q8\""));
  EXPECT_THAT(
      ParseError(OneTensor(
          R"({"dtype": "F32", "shape": [2], "slices": [[0, 2, "f"]]})")),
      HasSubstr("a slice that is not [begin, end, \"file\", byte offset]"));
  EXPECT_THAT(
      ParseError(OneTensor(
          R"({"dtype": "F32", "shape": [2], "slices": [[0, 2, "f", 0]]})")),
      ::testing::IsEmpty());  // the same index, whole, parses
  EXPECT_THAT(ParseError("{"), HasSubstr("checkpoint index i: "));
}

}  // namespace
}  // namespace tandem::train::checkpoint
