#include "train/hf/gpt2_pretrained.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/tensor.h"
#include "train/checkpoint/atomic_file.h"
#include "train/checkpoint/safetensors.h"
#include "train/hf/gpt2_config.h"

namespace tandem::train::hf {
namespace {

using ::testing::HasSubstr;

nn::GptConfig Tiny() {
  nn::GptConfig c;
  c.vocab_size = 32;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  return c;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
  return dir;
}

std::unique_ptr<nn::Gpt> Make(const nn::GptConfig& config, uint64_t seed,
                              Generator& gen) {
  gen = Generator(seed);
  absl::StatusOr<std::unique_ptr<nn::Gpt>> m = nn::Gpt::Create(config, gen);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

std::vector<std::vector<float>> Values(const nn::Module& m) {
  std::vector<std::vector<float>> out;
  for (const nn::NamedTensor& e : m.StateDict()) {
    out.push_back(*e.tensor.ToVector<float>());
  }
  return out;
}

TEST(Gpt2PretrainedTest, SaveThenLoadGivesTheSameModelAndLogits) {
  const std::string dir = FreshDir("round_trip");
  Generator g1(0), g2(0);
  std::unique_ptr<nn::Gpt> a = Make(Tiny(), 1, g1);
  std::unique_ptr<nn::Gpt> b = Make(Tiny(), 2, g2);
  ASSERT_NE(Values(*a), Values(*b));
  ASSERT_TRUE(SaveGpt2Pretrained(dir, *a).ok());
  EXPECT_TRUE(checkpoint::FileExists(dir + "/config.json"));
  absl::StatusOr<checkpoint::SafetensorsContent> file =
      checkpoint::LoadSafetensors(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata.at("format"), "pt");
  EXPECT_EQ(file->tensors.size(), a->StateDict().size());  // no lm_head
  ASSERT_TRUE(LoadGpt2Pretrained(dir, *b).ok());
  EXPECT_EQ(Values(*a), Values(*b));
  a->Eval();
  b->Eval();
  Tensor idx = *Tensor::FromVector<int64_t>({1, 5, 9, 31, 0, 2}, {2, 3});
  EXPECT_EQ(*(*a->Forward(idx)).ToVector<float>(),
            *(*b->Forward(idx)).ToVector<float>());
}

TEST(Gpt2PretrainedTest, AnotherConfigurationIsRefusedBeforeAnyWeightIsRead) {
  const std::string dir = FreshDir("other_config");
  Generator g1(0), g2(0);
  nn::GptConfig wide = Tiny();
  wide.n_embd = 16;
  ASSERT_TRUE(SaveGpt2Pretrained(dir, *Make(wide, 1, g1)).ok());
  std::unique_ptr<nn::Gpt> b = Make(Tiny(), 2, g2);
  const auto before = Values(*b);
  absl::Status s = LoadGpt2Pretrained(dir, *b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Hugging Face config " + dir +
                        "/config.json: describes another model: n_embd is "
                        "16, the run asks for 8 (--n_embd)"));
  EXPECT_EQ(Values(*b), before);
}

// config.json says the right model but the weights are another's: the
// tensor check names the file, the key and both shapes; nothing is loaded.
TEST(Gpt2PretrainedTest, WeightsOfAnotherShapeAreNamedWithTheFile) {
  const std::string dir = FreshDir("other_weights");
  Generator g1(0), g2(0), g3(0);
  nn::GptConfig more_vocab = Tiny();
  more_vocab.vocab_size = 40;
  ASSERT_TRUE(SaveGpt2Pretrained(dir, *Make(more_vocab, 1, g1)).ok());
  ASSERT_TRUE(checkpoint::WriteFileAtomically(dir + "/config.json",
                                              Gpt2ConfigJson(Tiny()))
                  .ok());
  std::unique_ptr<nn::Gpt> b = Make(Tiny(), 2, g2);
  const auto before = Values(*b);
  absl::Status s = LoadGpt2Pretrained(dir, *b);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("Hugging Face GPT-2 file " + dir +
                        "/model.safetensors does not fit the model: key "
                        "\"transformer.wte.weight\" has shape [40, 8], the "
                        "model expects [32, 8]"));
  EXPECT_EQ(Values(*b), before);
}

TEST(Gpt2PretrainedTest, AMissingFileIsNotFoundWithAHint) {
  const std::string dir = FreshDir("bin_only");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "' && touch '" + dir +
                         "/pytorch_model.bin' '" + dir + "/config.json'")
                            .c_str()),
            0);
  Generator g(0);
  std::unique_ptr<nn::Gpt> b = Make(Tiny(), 2, g);
  absl::Status s = LoadGpt2Pretrained(dir, *b);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("no " + dir +
                        "/model.safetensors (the folder holds "
                        "pytorch_model.bin, which is not read"));
  absl::Status none = LoadGpt2Pretrained(dir + "/nothing", *b);
  EXPECT_EQ(none.code(), absl::StatusCode::kNotFound);
}

TEST(Gpt2PretrainedTest, ExportNeedsAnExistingParent) {
  Generator g(0);
  absl::Status s =
      SaveGpt2Pretrained(FreshDir("no_parent") + "/a/b", *Make(Tiny(), 1, g));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot create the folder"));
}

}  // namespace
}  // namespace tandem::train::hf
