// CheckGptDdpConfig's rules, each refused value named with what is
// expected, and --parallel's modes.
#include "train/examples/gpt_ddp_config.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

std::string Message(const GptDdpConfig& config) {
  return std::string(CheckGptDdpConfig(config).message());
}

TEST(GptDdpConfigTest, TheDefaultsPass) {
  EXPECT_TRUE(CheckGptDdpConfig(GptDdpConfig()).ok());
}

TEST(GptDdpConfigTest, EachRuleNamesTheFlagAndWhatItExpects) {
  GptDdpConfig c;
  c.block_size = c.model.block_size + 1;
  EXPECT_THAT(Message(c),
              HasSubstr(absl::StrCat("--block_size=", c.model.block_size + 1,
                                     "; expected 1 to the model's positions "
                                     "(n_positions = ",
                                     c.model.block_size, ")")));
  c = GptDdpConfig();
  c.grad_accum = 0;
  EXPECT_EQ(Message(c), "--grad_accum=0; expected an integer >= 1");
  c = GptDdpConfig();
  c.sample_tokens = 1000001;
  EXPECT_EQ(Message(c), "--sample_tokens=1000001; expected at most 1000000");
  c = GptDdpConfig();
  c.eval_every = -1;
  EXPECT_EQ(Message(c), "--eval_every=-1; expected >= 0 (0: at the end)");
  c = GptDdpConfig();
  c.grad_clip = NAN;
  EXPECT_EQ(Message(c), "--grad_clip=nan; expected a finite value >= 0");
  c = GptDdpConfig();
  c.beta2 = 1;
  EXPECT_EQ(Message(c), "--beta2=1; expected [0, 1)");
  c = GptDdpConfig();
  c.lr_decay = "linear";
  EXPECT_EQ(Message(c), "--lr_decay=linear; expected cosine or constant");
  c = GptDdpConfig();
  c.warmup_steps = c.max_steps;
  EXPECT_THAT(Message(c), HasSubstr("0 <= warmup_steps < --max_steps"));
  c.lr_decay = "constant";  // no warm-up without the cosine schedule
  EXPECT_TRUE(CheckGptDdpConfig(c).ok());
  c = GptDdpConfig();
  c.model.n_head = 5;  // does not divide n_embd (768)
  EXPECT_THAT(Message(c), HasSubstr("(flags --n_layer --n_head --n_embd "
                                    "--block_size --vocab --dropout, or "
                                    "--preset)"));
}

TEST(GptDdpConfigTest, F16NeedsDdp) {
  GptDdpConfig c;
  c.amp = DType::kF16;
  EXPECT_TRUE(CheckGptDdpConfig(c).ok());
  c.parallel = "fsdp";
  EXPECT_THAT(Message(c), HasSubstr("--amp=f16; expected bf16 or off with "
                                    "--parallel=fsdp"));
  c.amp = DType::kBF16;
  EXPECT_TRUE(CheckGptDdpConfig(c).ok());
}

TEST(GptDdpConfigTest, ParallelModes) {
  EXPECT_EQ(*GptParallelMode("ddp"), ShardMode::kNone);
  EXPECT_EQ(*GptParallelMode("zero1"), ShardMode::kZero1);
  EXPECT_EQ(*GptParallelMode("zero2"), ShardMode::kZero2);
  EXPECT_EQ(*GptParallelMode("fsdp"), ShardMode::kFsdp);
  // "none" and "local" are --shard's words, not --parallel's.
  for (const char* bad : {"none", "local", "DDP", ""}) {
    EXPECT_EQ(GptParallelMode(bad).status(),
              absl::InvalidArgumentError(absl::StrCat(
                  "--parallel=", bad, "; expected ddp, zero1, zero2 or fsdp")))
        << bad;
  }
  GptDdpConfig c;
  c.parallel = "pipe";
  EXPECT_EQ(Message(c), "--parallel=pipe; expected ddp, zero1, zero2 or fsdp");
}

}  // namespace
}  // namespace tandem::train
