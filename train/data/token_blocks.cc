#include "train/data/token_blocks.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/input_file.h"
#include "base/status_macros.h"

namespace tandem::train {

TokenBlocks::TokenBlocks(std::shared_ptr<const std::vector<int32_t>> tokens,
                         int64_t block_size, int64_t vocab, std::string source)
    : tokens_(std::move(tokens)),
      block_size_(block_size),
      vocab_(vocab),
      size_((static_cast<int64_t>(tokens_->size()) - 1) / block_size),
      source_(std::move(source)) {}

absl::StatusOr<TokenBlocks> TokenBlocks::FromFile(const std::string& path,
                                                  int64_t block_size) {
  TANDEM_ASSIGN_OR_RETURN(const std::string bytes, ReadInputFile(path));
  std::vector<int32_t> tokens(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    tokens[i] = static_cast<unsigned char>(bytes[i]);
  }
  return FromTokens(std::move(tokens), block_size, kByteVocab, path);
}

absl::StatusOr<TokenBlocks> TokenBlocks::FromTokens(std::vector<int32_t> tokens,
                                                    int64_t block_size,
                                                    int64_t vocab,
                                                    std::string source) {
  if (block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size ", block_size, ": expected at least 1"));
  }
  if (vocab < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary of ", vocab, ": expected at least 1 token"));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < block_size + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": ", n, " token(s); one block needs block_size + 1 = ",
        block_size + 1, " (a longer text or a smaller --block_size)"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": token ", i, " is ", tokens[i],
                       ", outside the vocabulary [0, ", vocab, ")"));
    }
  }
  return TokenBlocks(
      std::make_shared<const std::vector<int32_t>>(std::move(tokens)),
      block_size, vocab, std::move(source));
}

absl::StatusOr<TokenBatch> TokenBlocks::Batch(
    absl::Span<const int64_t> indices) const {
  if (indices.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": a batch of no blocks"));
  }
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t t = block_size_;
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros({b, t}, DType::kI64));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::Zeros({b, t}, DType::kI64));
  int64_t* xs = x.data<int64_t>();
  int64_t* ys = y.data<int64_t>();
  const int32_t* tokens = tokens_->data();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[r];
    if (i < 0 || i >= size_) {
      return absl::OutOfRangeError(absl::StrCat(source_, ": block ", i, " of ",
                                                size_, " (blocks of ", t,
                                                " tokens)"));
    }
    const int32_t* from = tokens + i * t;
    for (int64_t c = 0; c < t; ++c) {
      xs[r * t + c] = from[c];
      ys[r * t + c] = from[c + 1];
    }
  }
  return TokenBatch{std::move(x), std::move(y)};
}

}  // namespace tandem::train
