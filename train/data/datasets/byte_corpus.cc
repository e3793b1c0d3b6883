#include "train/data/datasets/byte_corpus.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/input_file.h"
#include "base/status_macros.h"

namespace tandem::train {

absl::StatusOr<TokenBlocks> LoadByteCorpus(const std::string& path,
                                           int64_t block_size,
                                           int64_t vocab_size) {
  TANDEM_ASSIGN_OR_RETURN(std::string bytes, ReadInputFile(path));
  std::vector<int32_t> tokens(bytes.begin(), bytes.end());
  for (size_t i = 0; i < bytes.size(); ++i) {
    tokens[i] = static_cast<unsigned char>(bytes[i]);
  }
  if (static_cast<int64_t>(tokens.size()) < block_size + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data=", path, " has ", tokens.size(),
        " bytes (tokens); one block needs --block_size + 1 = ", block_size + 1,
        "; use a longer text or a smaller --block_size"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data=", path, " has byte ", tokens[i], " at offset ", i,
          ", outside the model's vocabulary of --vocab=", vocab_size,
          " tokens; byte-level text needs --vocab=", TokenBlocks::kByteVocab));
    }
  }
  return TokenBlocks::FromTokens(std::move(tokens), block_size, vocab_size,
                                 path);
}

}  // namespace tandem::train
