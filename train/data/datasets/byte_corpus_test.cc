// LoadByteCorpus: a file's bytes as tokens in blocks, and the corpora it
// refuses (too short for one block, a byte outside the vocabulary).
#include "train/data/datasets/byte_corpus.h"

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(ByteCorpusTest, BytesAreTokensInBlocks) {
  const std::string path = Write("abc.txt", "abcdefghij");  // 10 bytes
  absl::StatusOr<TokenBlocks> blocks = LoadByteCorpus(path, 4, 256);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->num_tokens(), 10);
  EXPECT_EQ(blocks->source(), path);
  // Blocks of 4 + 1 tokens at offsets 0, 4: two of them.
  EXPECT_EQ(blocks->size(), 2);
  absl::StatusOr<TokenBatch> second = blocks->Batch({1});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second->x.ToVector<int64_t>(),
            std::vector<int64_t>({'e', 'f', 'g', 'h'}));
  EXPECT_EQ(*second->y.ToVector<int64_t>(),
            std::vector<int64_t>({'f', 'g', 'h', 'i'}));
}

TEST(ByteCorpusTest, RefusesACorpusShorterThanOneBlock) {
  const std::string path = Write("short.txt", "abcd");
  EXPECT_EQ(LoadByteCorpus(path, 4, 256).status(),
            absl::InvalidArgumentError(absl::StrCat(
                "--data=", path,
                " has 4 bytes (tokens); one block needs --block_size + 1 = 5; "
                "use a longer text or a smaller --block_size")));
}

TEST(ByteCorpusTest, RefusesABytePastTheVocabulary) {
  const std::string path = Write("high.txt", std::string("ab\xe9z", 4));
  EXPECT_EQ(LoadByteCorpus(path, 2, 128).status(),
            absl::InvalidArgumentError(absl::StrCat(
                "--data=", path,
                " has byte 233 at offset 2, outside the model's vocabulary of "
                "--vocab=128 tokens; byte-level text needs --vocab=256")));
  EXPECT_TRUE(LoadByteCorpus(path, 2, 256).ok());
}

TEST(ByteCorpusTest, AMissingFileIsAnError) {
  EXPECT_FALSE(LoadByteCorpus("/nonexistent/corpus.txt", 2, 256).ok());
}

}  // namespace
}  // namespace tandem::train
