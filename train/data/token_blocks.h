// A language-model corpus as training blocks, defined so that any PyTorch
// script can cut the same batches: the token stream is cut into blocks of
// block_size + 1 tokens starting at offsets i * block_size (consecutive
// blocks share one token), block i giving the input x = tokens[o, o + T) and
// the target y = tokens[o + 1, o + T + 1), o = i * T, T = block_size. A
// DistributedSampler over block indices then picks each rank's blocks.
//
//   TANDEM_ASSIGN_OR_RETURN(TokenBlocks blocks,
//                           TokenBlocks::FromFile("corpus.txt", 256));
//   TANDEM_ASSIGN_OR_RETURN(TokenBatch batch, blocks.Batch({4, 0, 9}));
//   // batch.x, batch.y: [3, 256] int64
//
// The PyTorch equivalent of block i:
//   data = torch.frombuffer(open(path, 'rb').read(), dtype=torch.uint8)
//   x = data[i*T : i*T+T].long(); y = data[i*T+1 : i*T+T+1].long()
//
// Byte-level tokens (vocabulary 256: a token is one byte of the file, as
// read, no normalisation). Immutable after creation; thread-safe to read.
#ifndef TANDEM_TRAIN_DATA_TOKEN_BLOCKS_H_
#define TANDEM_TRAIN_DATA_TOKEN_BLOCKS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tensor/tensor.h"

namespace tandem::train {

// Inputs and targets of a batch of blocks, CPU int64 tensors [B, T].
struct TokenBatch {
  Tensor x;
  Tensor y;
};

class TokenBlocks {
 public:
  // The vocabulary of byte-level tokens.
  static constexpr int64_t kByteVocab = 256;

  // Reads every byte of `path` (a regular file, or a pipe read once; see
  // base/input_file.h) as tokens. Errors name the file: unreadable, or
  // shorter than one block (block_size + 1 tokens); block_size < 1 is
  // InvalidArgument.
  static absl::StatusOr<TokenBlocks> FromFile(const std::string& path,
                                              int64_t block_size);
  // The same over tokens already in memory (`source` names them in errors).
  // Every token must lie in [0, vocab): the first that does not is an
  // error naming its position and value.
  static absl::StatusOr<TokenBlocks> FromTokens(std::vector<int32_t> tokens,
                                                int64_t block_size,
                                                int64_t vocab,
                                                std::string source);

  // Number of blocks: floor((tokens - 1) / block_size).
  int64_t size() const { return size_; }
  int64_t block_size() const { return block_size_; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_->size()); }
  int64_t vocab() const { return vocab_; }
  const std::string& source() const { return source_; }
  // Every token, in order (shared by the copies; valid while one lives).
  const std::vector<int32_t>& tokens() const { return *tokens_; }

  // Blocks `indices` as one batch, in that order. An index outside
  // [0, size()) is OutOfRange naming it; an empty list is InvalidArgument.
  absl::StatusOr<TokenBatch> Batch(absl::Span<const int64_t> indices) const;

 private:
  TokenBlocks(std::shared_ptr<const std::vector<int32_t>> tokens,
              int64_t block_size, int64_t vocab, std::string source);

  // Shared: copies of a TokenBlocks (one per rank thread) share the tokens.
  std::shared_ptr<const std::vector<int32_t>> tokens_;
  int64_t block_size_ = 0;
  int64_t vocab_ = 0;
  int64_t size_ = 0;
  std::string source_;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_TOKEN_BLOCKS_H_
