#include "train/examples/gpt_ddp/gpt_ddp_config.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

absl::Status Bad(const std::string& flag, const std::string& value,
                 const std::string& expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, "; expected ", expected));
}

int64_t Or(int64_t option, int64_t fallback) {
  return option != 0 ? option : fallback;
}

}  // namespace

absl::StatusOr<GptDdpConfig> ResolveGptDdpConfig(
    const GptDdpOptions& options, checkpoint::CheckpointOptions checkpoint) {
  nn::GptConfig base;
  if (options.preset == "gpt2") {
    base = nn::GptConfig::Gpt2();
  } else if (options.preset.empty()) {
    base.vocab_size = 256;
    base.n_layer = 4;
    base.n_head = 4;
    base.n_embd = 64;
    base.block_size = 0;  // from --block_size
  } else {
    return Bad("preset", options.preset, "gpt2 or nothing");
  }
  GptDdpConfig c{options, base, std::move(checkpoint)};
  c.model.n_layer = Or(options.n_layer, base.n_layer);
  c.model.n_head = Or(options.n_head, base.n_head);
  c.model.n_embd = Or(options.n_embd, base.n_embd);
  c.model.vocab_size = Or(options.vocab, base.vocab_size);
  c.model.dropout = options.dropout;
  c.block_size =
      Or(options.block_size, base.block_size > 0 ? base.block_size : 64);
  if (base.block_size == 0) c.model.block_size = c.block_size;
  TANDEM_RETURN_IF_ERROR(CheckGptDdpConfig(c));
  return c;
}

absl::Status CheckGptDdpConfig(const GptDdpConfig& c) {
  TANDEM_RETURN_IF_ERROR(CheckFlagRules(c.RankFlags()));
  if (absl::Status s = c.model.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(s.message(),
                     " (flags --n_layer --n_head --n_embd --block_size "
                     "--vocab --dropout, or --preset)"));
  }
  if (c.block_size < 1 || c.block_size > c.model.block_size) {
    return Bad("block_size", absl::StrCat(c.block_size),
               absl::StrCat("1 to the model's positions (n_positions = ",
                            c.model.block_size, ")"));
  }
  if (c.lr_decay == "cosine" && c.warmup_steps >= c.max_steps) {
    return Bad("warmup_steps", absl::StrCat(c.warmup_steps),
               absl::StrCat("0 <= warmup_steps < --max_steps (", c.max_steps,
                            ") with --lr_decay=cosine"));
  }
  if (c.amp == "f16" && c.parallel != "ddp") {
    return Bad("amp", "f16",
               absl::StrCat("bf16 or off with --parallel=", c.parallel,
                            ": f16's narrow range needs loss scaling (a "
                            "GradScaler), which steps the whole model's "
                            "optimizer, so --amp=f16 runs with --parallel=ddp "
                            "only"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
