// CheckGptDdpConfig's rules, each refused value named with what is
// expected, and --parallel's modes.
#include "train/examples/gpt_ddp/gpt_ddp_config.h"

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

// The flags' defaults: the 4-layer byte-level model, blocks of 64.
GptDdpConfig Defaults() { return *ResolveGptDdpConfig(GptDdpOptions(), {}); }

TEST(GptDdpConfigTest, TheDefaultsPass) {
  absl::StatusOr<GptDdpConfig> c = ResolveGptDdpConfig(GptDdpOptions(), {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.ToString(),
            "vocab_size=256, block_size=64, n_layer=4, n_head=4, n_embd=64, "
            "dropout=0.0, layer_norm_epsilon=1e-05");
  EXPECT_EQ(c->block_size, 64);
  EXPECT_EQ(AutocastDType(c->amp), std::nullopt);
}

TEST(GptDdpConfigTest, ThePresetAndTheOptionsThatAreNotZero) {
  GptDdpOptions o;
  o.preset = "gpt2";
  o.n_layer = 2;
  o.block_size = 128;
  o.amp = "bf16";
  absl::StatusOr<GptDdpConfig> c = ResolveGptDdpConfig(o, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.n_layer, 2);
  EXPECT_EQ(c->model.n_embd, 768);
  EXPECT_EQ(c->model.block_size, 1024);  // the preset's positions
  EXPECT_EQ(c->block_size, 128);
  EXPECT_EQ(AutocastDType(c->amp), DType::kBF16);
  o.preset = "gpt3";
  EXPECT_EQ(ResolveGptDdpConfig(o, {}).status(),
            absl::InvalidArgumentError("--preset=gpt3; expected gpt2 or "
                                       "nothing"));
}

TEST(GptDdpConfigTest, EachRuleNamesTheFlagAndWhatItExpects) {
  GptDdpConfig c = Defaults();
  c.block_size = c.model.block_size + 1;
  EXPECT_THAT(Message(c),
              HasSubstr(absl::StrCat("--block_size=", c.model.block_size + 1,
                                     "; expected 1 to the model's positions "
                                     "(n_positions = ",
                                     c.model.block_size, ")")));
  c = Defaults();
  c.grad_accum = 0;
  EXPECT_EQ(Message(c), "--grad_accum=0 (expected 1 <= grad_accum <= 65536)");
  c = Defaults();
  c.sample_tokens = 1000001;
  EXPECT_EQ(Message(c),
            "--sample_tokens=1000001 (expected 0 <= sample_tokens <= 1000000)");
  c = Defaults();
  c.eval_every = -1;
  EXPECT_EQ(Message(c), "--eval_every=-1 (expected eval_every >= 0)");
  c = Defaults();
  c.grad_clip = NAN;
  EXPECT_EQ(Message(c), "--grad_clip=nan (expected grad_clip >= 0, finite)");
  c = Defaults();
  c.beta2 = 1;
  EXPECT_EQ(Message(c), "--beta2=1 (expected 0 <= beta2 < 1)");
  c = Defaults();
  c.lr_decay = "linear";
  EXPECT_EQ(Message(c), "--lr_decay=linear (expected cosine or constant)");
  c = Defaults();
  c.warmup_steps = c.max_steps;
  EXPECT_THAT(Message(c), HasSubstr("0 <= warmup_steps < --max_steps"));
  c.lr_decay = "constant";  // no warm-up without the cosine schedule
  EXPECT_TRUE(CheckGptDdpConfig(c).ok());
  c = Defaults();
  c.model.n_head = 5;  // does not divide n_embd (64)
  EXPECT_THAT(Message(c), HasSubstr("(flags --n_layer --n_head --n_embd "
                                    "--block_size --vocab --dropout, or "
                                    "--preset)"));
}

TEST(GptDdpConfigTest, F16NeedsDdp) {
  GptDdpConfig c = Defaults();
  c.amp = "f16";
  EXPECT_TRUE(CheckGptDdpConfig(c).ok());
  c.parallel = "fsdp";
  EXPECT_THAT(Message(c), HasSubstr("--amp=f16; expected bf16 or off with "
                                    "--parallel=fsdp"));
  c.amp = "bf16";
  EXPECT_TRUE(CheckGptDdpConfig(c).ok());
}

TEST(GptDdpConfigTest, ParallelModes) {
  // "none" and "local" are --shard's words, not --parallel's.
  for (const char* bad : {"none", "local", "DDP", "", "pipe"}) {
    GptDdpConfig c = Defaults();
    c.parallel = bad;
    EXPECT_EQ(Message(c), absl::StrCat("--parallel=", bad,
                                       " (expected ddp, zero1, zero2 or fsdp)"))
        << bad;
  }
}

}  // namespace
}  // namespace tandem::train
