// A byte corpus: a file's bytes as the tokens of a byte-level language
// model (a GPT), cut into training blocks (train/data/token_blocks.h).
//
//   TANDEM_ASSIGN_OR_RETURN(TokenBlocks blocks,
//                           LoadByteCorpus("corpus.txt", 256, 256));
//
// Its errors name the options as the flags that usually carry them
// (--data=, --block_size, --vocab).
#ifndef TANDEM_TRAIN_DATA_DATASETS_BYTE_CORPUS_H_
#define TANDEM_TRAIN_DATA_DATASETS_BYTE_CORPUS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "train/data/token_blocks.h"

namespace tandem::train {

// The corpus as blocks of `block_size`: the bytes of `path` (a regular
// file or a pipe: base/input_file.h), each a token that must be below
// `vocab_size` (the first that is not is an error naming its offset and
// value, and the --vocab to use); a corpus shorter than one block is an
// error naming both lengths.
absl::StatusOr<TokenBlocks> LoadByteCorpus(const std::string& path,
                                           int64_t block_size,
                                           int64_t vocab_size);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_DATA_DATASETS_BYTE_CORPUS_H_
