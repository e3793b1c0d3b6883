// gpt_ddp's corpus: a file's bytes as the tokens of a byte-level GPT, cut
// into training blocks (train/data/token_blocks.h).
#ifndef TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_CORPUS_H_
#define TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_CORPUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "train/data/token_blocks.h"
#include "train/examples/gpt_ddp/gpt_ddp_config.h"

namespace tandem::train {

// The corpus as blocks of config.block_size: the bytes of `path` (a regular
// file or a pipe: base/input_file.h), each a token that must be below
// config.model.vocab_size (the first that is not is an error naming its
// offset and value, and the --vocab to use); a corpus shorter than one
// block is an error naming both lengths.
absl::StatusOr<TokenBlocks> LoadGptCorpus(const std::string& path,
                                          const GptDdpConfig& config);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_GPT_DDP_GPT_CORPUS_H_
