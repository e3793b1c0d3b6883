#include "train/data/token_blocks.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

std::vector<int64_t> Row(const Tensor& t, int64_t r) {
  const int64_t n = t.dim(1);
  const int64_t* p = t.data<int64_t>() + r * n;
  return std::vector<int64_t>(p, p + n);
}

std::vector<int64_t> Bytes(const std::string& s) {
  return std::vector<int64_t>(s.begin(), s.end());
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// "abcdefghij", T = 3: blocks at offsets 0, 3, 6 of 4 tokens each
// ("abcd", "defg", "ghij"); the last token is only ever a target. The
// PyTorch cut of the same file, for comparison:
//   d = torch.frombuffer(b"abcdefghij", dtype=torch.uint8)
//   [(d[i*3:i*3+3].tolist(), d[i*3+1:i*3+4].tolist()) for i in range(3)]
TEST(TokenBlocksTest, BlocksOverlapByOneTokenAndTargetsAreShiftedByOne) {
  auto blocks = TokenBlocks::FromFile(WriteFile("c.txt", "abcdefghij"), 3);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->size(), 3);
  EXPECT_EQ(blocks->num_tokens(), 10);
  EXPECT_EQ(blocks->vocab(), 256);
  auto batch = blocks->Batch({2, 0, 1, 2});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->x.shape(), (Shape{4, 3}));
  EXPECT_EQ(batch->x.dtype(), DType::kI64);
  EXPECT_EQ(Row(batch->x, 0), Bytes("ghi"));
  EXPECT_EQ(Row(batch->y, 0), Bytes("hij"));
  EXPECT_EQ(Row(batch->x, 1), Bytes("abc"));
  EXPECT_EQ(Row(batch->y, 1), Bytes("bcd"));
  EXPECT_EQ(Row(batch->x, 2), Bytes("def"));
  EXPECT_EQ(Row(batch->y, 2), Bytes("efg"));
  EXPECT_EQ(Row(batch->x, 3), Bytes("ghi"));
}

TEST(TokenBlocksTest, BlockCountIsTokensMinusOneOverBlockSize) {
  // 11 tokens, T = 5: offsets 0 and 5 need tokens up to 5 and 10.
  auto eleven = TokenBlocks::FromTokens(std::vector<int32_t>(11, 1), 5, 2, "m");
  ASSERT_TRUE(eleven.ok()) << eleven.status();
  EXPECT_EQ(eleven->size(), 2);
  // 10 tokens: the second block would need token 10.
  auto ten = TokenBlocks::FromTokens(std::vector<int32_t>(10, 1), 5, 2, "m");
  ASSERT_TRUE(ten.ok()) << ten.status();
  EXPECT_EQ(ten->size(), 1);
}

TEST(TokenBlocksTest, BytesAboveAsciiAreTokensAsRead) {
  auto blocks = TokenBlocks::FromFile(
      WriteFile("u.txt", std::string("\xc3\xa9\xff\0x", 5)), 2);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  auto batch = blocks->Batch({1});
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(Row(batch->x, 0), (std::vector<int64_t>{255, 0}));
  EXPECT_EQ(Row(batch->y, 0), (std::vector<int64_t>{0, 'x'}));
}

TEST(TokenBlocksTest, ACorpusShorterThanOneBlockIsRefusedNamingTheFile) {
  const std::string path = WriteFile("short.txt", "abcd");
  auto blocks = TokenBlocks::FromFile(path, 4);
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(blocks.status().message(), HasSubstr(path));
  EXPECT_THAT(blocks.status().message(),
              HasSubstr("4 token(s); one block needs block_size + 1 = 5"));
  EXPECT_FALSE(TokenBlocks::FromFile(path, 0).ok());
  EXPECT_THAT(TokenBlocks::FromFile(path + ".missing", 2).status().message(),
              HasSubstr(".missing"));
}

TEST(TokenBlocksTest, ATokenOutsideTheVocabularyIsRefusedWithItsPosition) {
  auto blocks = TokenBlocks::FromTokens({1, 2, 7, 3}, 2, 5, "ids");
  ASSERT_FALSE(blocks.ok());
  EXPECT_THAT(blocks.status().message(),
              HasSubstr("ids: token 2 is 7, outside the vocabulary [0, 5)"));
}

TEST(TokenBlocksTest, BadBatchIndicesAreRefused) {
  auto blocks = TokenBlocks::FromTokens({1, 2, 3, 4, 5}, 2, 8, "ids");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->Batch({2}).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(blocks->Batch({0, -1}).status().message(),
              HasSubstr("block -1 of 2"));
  EXPECT_EQ(blocks->Batch({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
