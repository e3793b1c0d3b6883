#include "train/hf/gpt2_config.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train::hf {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

nn::GptConfig Tiny() {
  nn::GptConfig c;
  c.vocab_size = 256;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.dropout = 0.1;
  c.layer_norm_epsilon = 1e-5;
  return c;
}

// What transformers 4.36.2 writes for GPT2Config(vocab_size=256,
// n_positions=16, n_embd=8, n_layer=2, n_head=2)
// .save_pretrained(DIR) (copied from its config.json), plus n_ctx.
constexpr char kTransformersConfig[] = R"({
  "activation_function": "gelu_new",
  "architectures": [
    "GPT2LMHeadModel"
  ],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 16,
  "n_embd": 8,
  "n_head": 2,
  "n_inner": null,
  "n_layer": 2,
  "n_positions": 16,
  "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1,
  "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "torch_dtype": "float32",
  "transformers_version": "4.36.2",
  "use_cache": true,
  "vocab_size": 256
}
)";

TEST(Gpt2ConfigTest, WritesWhatSavePretrainedWrites) {
  EXPECT_EQ(Gpt2ConfigJson(Tiny()), kTransformersConfig);
}

TEST(Gpt2ConfigTest, ReadsItBack) {
  absl::StatusOr<nn::GptConfig> c =
      ParseGpt2ConfigJson(Gpt2ConfigJson(Tiny()), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 256);
  EXPECT_EQ(c->block_size, 16);
  EXPECT_EQ(c->n_layer, 2);
  EXPECT_EQ(c->n_head, 2);
  EXPECT_EQ(c->n_embd, 8);
  EXPECT_EQ(c->dropout, 0.1);
  EXPECT_EQ(c->layer_norm_epsilon, 1e-5);
  EXPECT_TRUE(CheckGpt2Config(*c, Tiny(), "config.json").ok());
}

// The hub's gpt2 config.json: fewer fields, the defaults apply.
TEST(Gpt2ConfigTest, AbsentOptionalFieldsTakeGpt2ConfigDefaults) {
  absl::StatusOr<nn::GptConfig> c = ParseGpt2ConfigJson(
      R"({"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024,
          "n_ctx": 1024, "n_embd": 768, "n_layer": 12, "n_head": 12,
          "activation_function": "gelu_new"})",
      "hub");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layer_norm_epsilon, 1e-5);
  EXPECT_EQ(c->dropout, 0.1);
  EXPECT_TRUE(CheckGpt2Config(*c, nn::GptConfig{}, "hub").ok());
}

TEST(Gpt2ConfigTest, CheckNamesEveryDifferenceWithBothValues) {
  nn::GptConfig found = Tiny();
  found.n_embd = 16;
  found.block_size = 32;
  found.layer_norm_epsilon = 1e-6;
  found.dropout = 0.0;  // a training setting: not compared
  absl::Status s = CheckGpt2Config(found, Tiny(), "/m/config.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("Hugging Face config /m/config.json: describes "
                           "another model: "));
  EXPECT_THAT(m, HasSubstr("n_positions is 32, the run asks for 16 "
                           "(--block_size)"));
  EXPECT_THAT(m, HasSubstr("n_embd is 16, the run asks for 8 (--n_embd)"));
  EXPECT_THAT(m, HasSubstr("layer_norm_epsilon is 1e-06, the model has 1e-05"));
  EXPECT_THAT(m, Not(HasSubstr("n_layer")));
}

std::string Replaced(const std::string& from, const std::string& to) {
  std::string text = Gpt2ConfigJson(Tiny());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Gpt2ConfigTest, RefusesWhatTandemsGptDoesNotCompute) {
  struct Case {
    std::string from, to, phrase;
  };
  const Case cases[] = {
      {R"("model_type": "gpt2")", R"("model_type": "bert")",
       "model_type is \"bert\", expected \"gpt2\""},
      {R"("activation_function": "gelu_new")",
       R"("activation_function": "relu")",
       "activation_function must be \"gelu_new\" or \"gelu_pytorch_tanh\""},
      {R"("n_inner": null)", R"("n_inner": 64)",
       "n_inner must be null or 4 * n_embd = 32"},
      {R"("scale_attn_weights": true)", R"("scale_attn_weights": false)",
       "scale_attn_weights must be true"},
      {R"("scale_attn_by_inverse_layer_idx": false)",
       R"("scale_attn_by_inverse_layer_idx": true)",
       "scale_attn_by_inverse_layer_idx must be false"},
      {R"("use_cache": true)",
       R"("use_cache": true, "tie_word_embeddings": false)",
       "tie_word_embeddings must be true"},
      {R"("n_embd": 8)", R"("n_embd": 8.0)",
       "n_embd is not an integer, expected the model's n_embd"},
      {R"("vocab_size": 256)", R"("vocab_sizes": 256)", "vocab_size is absent"},
      {"{", "[", "Hugging Face config c.json: JSON: expected"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<nn::GptConfig> r =
        ParseGpt2ConfigJson(Replaced(c.from, c.to), "c.json");
    ASSERT_FALSE(r.ok()) << c.to;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.phrase));
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("Hugging Face config c.json: "));
  }
  EXPECT_TRUE(ParseGpt2ConfigJson(
                  Replaced(R"("activation_function": "gelu_new")",
                           R"("activation_function": "gelu_pytorch_tanh")"),
                  "c.json")
                  .ok());
}

}  // namespace
}  // namespace tandem::train::hf
