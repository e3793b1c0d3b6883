#include "tensor/nn/models/gpt_generate.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/models/gpt.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A model whose last-position logits are `row` whatever the ids; it records
// each input's length.
struct FixedLogits {
  std::vector<float> row;
  int64_t block_size = 8;
  std::vector<int64_t> lengths = {};

  LogitsSource Source() {
    LogitsSource s;
    s.block_size = block_size;
    s.vocab_size = static_cast<int64_t>(row.size());
    s.forward = [this](const Tensor& idx) -> absl::StatusOr<Tensor> {
      const int64_t t = idx.shape()[1];
      lengths.push_back(t);
      std::vector<float> all;
      for (int64_t i = 0; i < t; ++i)
        all.insert(all.end(), row.begin(), row.end());
      return Tensor::FromVector(all, {1, t, static_cast<int64_t>(row.size())});
    };
    return s;
  }
};

TEST(GenerateTokensTest, ReturnsThePromptThenTheNewIds) {
  FixedLogits m{.row = {0.f, 5.f, 1.f}};
  Generator gen(1);
  absl::StatusOr<std::vector<int64_t>> ids = GenerateTokens(
      m.Source(), {2, 0}, {.max_new_tokens = 3, .top_k = 1}, gen);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(2, 0, 1, 1, 1));  // top_k 1: the argmax
}

TEST(GenerateTokensTest, TiesGoToTheLowerId) {
  FixedLogits m{.row = {1.f, 3.f, 3.f, 0.f}};
  Generator gen(1);
  absl::StatusOr<std::vector<int64_t>> ids =
      GenerateTokens(m.Source(), {0}, {.max_new_tokens = 4, .top_k = 1}, gen);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(0, 1, 1, 1, 1));
}

TEST(GenerateTokensTest, SamplesTheSoftmaxOfTheLogits) {
  // Weights 1 and 3: id 1 three times as often as id 0.
  FixedLogits m{.row = {0.f, static_cast<float>(std::log(3.0))}};
  Generator gen(7);
  absl::StatusOr<std::vector<int64_t>> ids =
      GenerateTokens(m.Source(), {0}, {.max_new_tokens = 4000}, gen);
  ASSERT_TRUE(ids.ok()) << ids.status();
  int64_t ones = 0;
  for (size_t i = 1; i < ids->size(); ++i) ones += (*ids)[i];
  // 4000 draws at p = 0.75: standard deviation 27; the bounds are 4 of them.
  EXPECT_GT(ones, 2890);
  EXPECT_LT(ones, 3110);
}

TEST(GenerateTokensTest, TopKKeepsOnlyTheLargest) {
  FixedLogits m{.row = {2.f, 0.f, 2.5f, 1.f, -1.f}};
  Generator gen(3);
  absl::StatusOr<std::vector<int64_t>> ids =
      GenerateTokens(m.Source(), {0}, {.max_new_tokens = 500, .top_k = 2}, gen);
  ASSERT_TRUE(ids.ok()) << ids.status();
  bool saw[5] = {};
  for (size_t i = 1; i < ids->size(); ++i) saw[(*ids)[i]] = true;
  EXPECT_TRUE(saw[0]);
  EXPECT_TRUE(saw[2]);
  EXPECT_FALSE(saw[1] || saw[3] || saw[4]);
}

TEST(GenerateTokensTest, TemperatureSharpensAndFlattens) {
  FixedLogits m{.row = {0.f, 1.f}};
  auto count_ones = [&](double temperature) {
    Generator gen(11);
    std::vector<int64_t> ids =
        GenerateTokens(m.Source(), {0},
                       {.max_new_tokens = 2000, .temperature = temperature},
                       gen)
            .value();
    int64_t ones = 0;
    for (size_t i = 1; i < ids.size(); ++i) ones += ids[i];
    return ones;
  };
  // p(1) = 1 / (1 + e^(-1/T)): 0.73 at T = 1, 1.0 at T = 0.01, 0.5 at 1e6.
  EXPECT_EQ(count_ones(0.01), 2000);
  const int64_t flat = count_ones(1e6);
  EXPECT_GT(flat, 900);
  EXPECT_LT(flat, 1100);
  const int64_t plain = count_ones(1.0);
  EXPECT_GT(plain, 1350);
  EXPECT_LT(plain, 1570);
}

TEST(GenerateTokensTest, TheSameGeneratorStateGivesTheSameIds) {
  FixedLogits m{.row = {0.5f, 0.f, 1.f, 0.25f}};
  Generator a(42), b(42);
  EXPECT_EQ(GenerateTokens(m.Source(), {1}, {.max_new_tokens = 50}, a).value(),
            GenerateTokens(m.Source(), {1}, {.max_new_tokens = 50}, b).value());
}

TEST(GenerateTokensTest, TheForwardSeesAtMostBlockSizeIds) {
  FixedLogits m{.row = {0.f, 1.f}, .block_size = 3};
  Generator gen(1);
  ASSERT_TRUE(
      GenerateTokens(m.Source(), {0}, {.max_new_tokens = 5, .top_k = 1}, gen)
          .ok());
  EXPECT_THAT(m.lengths, ElementsAre(1, 2, 3, 3, 3));
}

TEST(GenerateTokensTest, BadArgumentsAreNamed) {
  FixedLogits m{.row = {0.f, 1.f}};
  Generator gen(1);
  auto message = [&](std::vector<int64_t> prompt, GenerateOptions o) {
    absl::StatusOr<std::vector<int64_t>> r =
        GenerateTokens(m.Source(), prompt, o, gen);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  EXPECT_THAT(message({}, {.max_new_tokens = 1}), HasSubstr("prompt is empty"));
  EXPECT_THAT(message({0, 2}, {.max_new_tokens = 1}),
              HasSubstr("prompt id 2 at position 1 is outside the vocabulary"));
  EXPECT_THAT(message({0}, {.max_new_tokens = -1}),
              HasSubstr("max_new_tokens is -1"));
  EXPECT_THAT(message({0}, {.max_new_tokens = 1, .temperature = 0}),
              HasSubstr("temperature is 0"));
  EXPECT_THAT(message({0}, {.max_new_tokens = 1, .temperature = NAN}),
              HasSubstr("temperature is nan"));
  EXPECT_THAT(message({0}, {.max_new_tokens = 1, .top_k = -2}),
              HasSubstr("top_k is -2"));
}

TEST(GenerateTokensTest, LogitsOfAnotherShapeAreAnError) {
  LogitsSource s;
  s.block_size = 4;
  s.vocab_size = 3;
  s.forward = [](const Tensor&) { return Tensor::Zeros({1, 1, 2}); };
  Generator gen(1);
  absl::StatusOr<std::vector<int64_t>> r =
      GenerateTokens(s, {0}, {.max_new_tokens = 1}, gen);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("logits of shape [1, 1, 2] for ids [1, 1]; expected "
                        "[1, 1, 3]"));
}

TEST(GptGenerateTest, EqualsGenerateTokensOverTheModelsForward) {
  GptConfig config;
  config.vocab_size = 11;
  config.block_size = 4;
  config.n_layer = 1;
  config.n_head = 2;
  config.n_embd = 8;
  Generator init(5);
  std::unique_ptr<Gpt> model = Gpt::Create(config, init).value();
  model->Eval();
  Generator a(9), b(9);
  std::vector<int64_t> by_method =
      model->Generate({3, 1}, {.max_new_tokens = 6, .top_k = 5}, a).value();
  LogitsSource source{
      .forward = [&](const Tensor& idx) { return model->Forward(idx); },
      .block_size = 4,
      .vocab_size = 11,
  };
  std::vector<int64_t> by_function =
      GenerateTokens(source, {3, 1}, {.max_new_tokens = 6, .top_k = 5}, b)
          .value();
  EXPECT_EQ(by_method.size(), 8u);
  EXPECT_EQ(by_method, by_function);
  EXPECT_THAT(std::vector<int64_t>(by_method.begin(), by_method.begin() + 2),
              ElementsAre(3, 1));
}

}  // namespace
}  // namespace tandem::nn
