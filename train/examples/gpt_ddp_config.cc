#include "train/examples/gpt_ddp_config.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
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

absl::Status CheckRate(const std::string& flag, double v) {
  if (std::isfinite(v) && v >= 0) return absl::OkStatus();
  return Bad(flag, absl::StrCat(v), "a finite value >= 0");
}

}  // namespace

absl::StatusOr<ShardMode> GptParallelMode(const std::string& parallel) {
  if (parallel == "ddp") return ShardMode::kNone;
  if (parallel == "zero1" || parallel == "zero2" || parallel == "fsdp") {
    return ParseShardMode(parallel);
  }
  return Bad("parallel", parallel, "ddp, zero1, zero2 or fsdp");
}

absl::Status CheckGptDdpConfig(const GptDdpConfig& c) {
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
  for (const auto& [flag, v] :
       {std::pair<const char*, int64_t>{"batch_size", c.batch_size},
        {"grad_accum", c.grad_accum},
        {"max_steps", c.max_steps},
        {"log_every", c.log_every},
        {"eval_blocks", c.eval_blocks},
        {"top_k", c.top_k}}) {
    if (v < 1) return Bad(flag, absl::StrCat(v), "an integer >= 1");
  }
  // Bounds far above any use of this example: larger values are typos (or
  // INT64_MAX) that would overflow a count or run for ever rather than fail.
  for (const auto& [flag, v, most] :
       {std::tuple<const char*, int64_t, int64_t>{"n_layer", c.model.n_layer,
                                                  1024},
        {"n_head", c.model.n_head, 4096},
        {"n_embd", c.model.n_embd, 65536},
        {"vocab", c.model.vocab_size, int64_t{1} << 24},
        {"block_size", c.model.block_size, int64_t{1} << 20},
        {"batch_size", c.batch_size, 65536},
        {"grad_accum", c.grad_accum, 65536},
        {"max_steps", c.max_steps, 1000000000},
        {"sample_tokens", c.sample_tokens, 1000000}}) {
    if (v > most) {
      return Bad(flag, absl::StrCat(v), absl::StrCat("at most ", most));
    }
  }
  if (c.eval_every < 0) {
    return Bad("eval_every", absl::StrCat(c.eval_every),
               ">= 0 (0: at the end)");
  }
  if (c.sample_tokens < 0) {
    return Bad("sample_tokens", absl::StrCat(c.sample_tokens), ">= 0");
  }
  TANDEM_RETURN_IF_ERROR(CheckRate("lr", c.lr));
  TANDEM_RETURN_IF_ERROR(CheckRate("min_lr", c.min_lr));
  TANDEM_RETURN_IF_ERROR(CheckRate("weight_decay", c.weight_decay));
  TANDEM_RETURN_IF_ERROR(CheckRate("grad_clip", c.grad_clip));
  for (const auto& [flag, v] :
       {std::pair<const char*, double>{"beta1", c.beta1}, {"beta2", c.beta2}}) {
    if (!(v >= 0 && v < 1)) return Bad(flag, absl::StrCat(v), "[0, 1)");
  }
  if (c.lr_decay != "cosine" && c.lr_decay != "constant") {
    return Bad("lr_decay", c.lr_decay, "cosine or constant");
  }
  if (c.lr_decay == "cosine" &&
      (c.warmup_steps < 0 || c.warmup_steps >= c.max_steps)) {
    return Bad("warmup_steps", absl::StrCat(c.warmup_steps),
               absl::StrCat("0 <= warmup_steps < --max_steps (", c.max_steps,
                            ") with --lr_decay=cosine"));
  }
  TANDEM_ASSIGN_OR_RETURN(const ShardMode mode, GptParallelMode(c.parallel));
  if (c.amp == DType::kF16 && mode != ShardMode::kNone) {
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
