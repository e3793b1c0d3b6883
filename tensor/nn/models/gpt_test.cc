// nn::Gpt against Hugging Face's GPT2LMHeadModel restated in PyTorch
// (testdata/make_gpt_fixtures.py wrote testdata/gpt_fixtures.inc): the
// state-dict names and shapes, the parameter count of GPT-2 small, the
// logits, loss and every parameter's gradient on a tiny configuration, the
// train-mode forward with dropout from the same seed, weight tying, the
// initial weights' statistics, and the refused inputs.
//
// Tolerances: tandem computes in f32, the reference in f64 on the same
// (f32) weights, so values differ by f32 rounding. Measured worst
// differences, and the tolerances (about 5x): logits 7.6e-7 (5e-6; they
// are O(1)), loss 9.2e-8 (1e-6), gradient elements 1.4e-7 (1e-6),
// gradient sums over up to 4096 elements 3.7e-6 (1e-5 + 1e-4 of the
// largest |element|, O(0.1)). The train-mode reference is f32 (its dropout
// masks are PyTorch's f32 draws): logits 8.3e-7 (5e-6).
#include "tensor/nn/models/gpt.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensor/amp/autocast.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/embedding.h"
#include "tensor/nn/module.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

using ::testing::HasSubstr;

struct GradFacts {
  const char* name;
  double sum;
  double weighted_sum;  // sum of g[i] * sin(0.13 i)
  double first[4];
  double last[4];
};

#include "tensor/nn/models/testdata/gpt_fixtures.inc"

constexpr int64_t kB = 2, kT = 8, kV = 64;

GptConfig Tiny() {
  GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 32;
  return c;
}

// The fixture's weights (make_gpt_fixtures.py: value()).
void SetFixtureWeights(Gpt& model) {
  int64_t k = 0;
  for (const NamedTensor& p : model.NamedParameters()) {
    const bool ln = p.name.find(".ln_") != std::string::npos;
    const bool weight = p.name.size() >= 6 &&
                        p.name.compare(p.name.size() - 6, 6, "weight") == 0;
    float* w = p.tensor.data<float>();
    for (int64_t i = 0; i < p.tensor.numel(); ++i) {
      const double s = std::sin(0.37 * static_cast<double>(i) + 0.91 * k);
      double v;
      if (ln) {
        v = weight ? 1 + 0.1 * s : 0.05 * s;
      } else {
        v = weight ? 0.1 * s : 0.02 * s;
      }
      w[i] = static_cast<float>(v);
    }
    ++k;
  }
}

Tensor Tokens(int64_t mul, int64_t add) {
  std::vector<int64_t> v(kB * kT);
  for (int64_t i = 0; i < kB * kT; ++i) v[i] = (mul * i + add) % kV;
  return Tensor::FromVector(v, {kB, kT}).value();
}

Tensor Targets() {
  std::vector<int64_t> v(kB * kT);
  for (int64_t i = 0; i < kB * kT; ++i) v[i] = (5 * i + 1) % kV;
  v[2] = -100;  // targets[0, 2]: ignored
  return Tensor::FromVector(v, {kB, kT}).value();
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want,
                double tol) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
  }
  EXPECT_LE(worst, tol);
}

TEST(GptTest, NamesAndShapesAreHuggingFaces) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(Tiny(), gen));
  std::vector<NamedTensor> params = model->NamedParameters();
  ASSERT_EQ(params.size(), std::size(kGrads));
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_EQ(params[k].name, kGrads[k].name);
  }
  EXPECT_EQ(params[0].tensor.shape(), (Shape{64, 32}));
  EXPECT_EQ(params[1].tensor.shape(), (Shape{16, 32}));
  EXPECT_EQ(params[4].name, "transformer.h.0.attn.c_attn.weight");
  EXPECT_EQ(params[4].tensor.shape(), (Shape{96, 32}));
  EXPECT_EQ(params[12].name, "transformer.h.0.mlp.c_proj.weight");
  EXPECT_EQ(params[12].tensor.shape(), (Shape{32, 128}));
  // No buffers: the state dict is the parameters.
  EXPECT_EQ(model->StateDict().size(), params.size());
}

TEST(GptTest, Gpt2HasHuggingFacesParameterCount) {
  // GPT2LMHeadModel(GPT2Config()).num_parameters() == 124439808 (the tied
  // lm_head counted once).
  const GptConfig c = GptConfig::Gpt2();
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.block_size, 1024);
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.n_head, 12);
  EXPECT_EQ(c.n_embd, 768);
  const int64_t C = c.n_embd;
  const int64_t per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C +
                            (4 * C * C + 4 * C) + (4 * C * C + C);
  EXPECT_EQ(c.vocab_size * C + c.block_size * C + c.n_layer * per_block + 2 * C,
            124439808);
  // The tiny model counts the same way.
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(Tiny(), gen));
  const int64_t t = 32;
  const int64_t tiny_block = 2 * t + (3 * t * t + 3 * t) + (t * t + t) + 2 * t +
                             (4 * t * t + 4 * t) + (4 * t * t + t);
  EXPECT_EQ(model->NumParameters(), 64 * t + 16 * t + 2 * tiny_block + 2 * t);
  // The configuration says as much before any tensor exists.
  EXPECT_EQ(Tiny().NumParameters(), model->NumParameters());
  EXPECT_EQ(c.NumParameters(), 124439808);
  GptConfig huge = c;
  huge.n_layer = int64_t{1} << 50;
  EXPECT_EQ(huge.NumParameters(), std::numeric_limits<int64_t>::max());
}

TEST(GptTest, ForwardAndBackwardEqualTheReference) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(Tiny(), gen));
  model->Eval();
  SetFixtureWeights(*model);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor logits, model->Forward(Tokens(7, 3)));
  EXPECT_EQ(logits.shape(), (Shape{kB, kT, kV}));
  ExpectNear(logits.ToVector<float>().value(), kEvalLogits, 5e-6);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Gpt::Loss(logits, Targets()));
  EXPECT_NEAR(loss.Item().value(), kEvalLoss, 1e-6);
  TANDEM_NN_ASSERT_OK(loss.Backward());
  std::vector<NamedTensor> params = model->NamedParameters();
  ASSERT_EQ(params.size(), std::size(kGrads));
  for (size_t k = 0; k < params.size(); ++k) {
    const GradFacts& want = kGrads[k];
    SCOPED_TRACE(want.name);
    ASSERT_TRUE(params[k].tensor.has_grad());
    std::vector<float> g = params[k].tensor.grad().ToVector<float>().value();
    double sum = 0, wsum = 0, scale = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      sum += g[i];
      wsum += g[i] * std::sin(0.13 * static_cast<double>(i));
      scale = std::max(scale, std::abs(static_cast<double>(g[i])));
    }
    const double tol = 1e-5 + 1e-4 * scale;
    EXPECT_NEAR(sum, want.sum, tol);
    EXPECT_NEAR(wsum, want.weighted_sum, tol);
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(g[j], want.first[j], 1e-6);
      EXPECT_NEAR(g[g.size() - 4 + j], want.last[j], 1e-6);
    }
  }
}

TEST(GptTest, TrainModeDropoutEqualsTheReferenceFromTheSameSeed) {
  GptConfig c = Tiny();
  c.dropout = 0.1;
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(c, gen));
  SetFixtureWeights(*model);
  gen.ManualSeed(5);  // the reference's torch.manual_seed(5)
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor logits, model->Forward(Tokens(7, 3)));
  ExpectNear(logits.ToVector<float>().value(), kTrainLogits, 5e-6);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Gpt::Loss(logits, Targets()));
  EXPECT_NEAR(loss.Item().value(), kTrainLoss, 1e-6);
  // Eval draws nothing and differs from the train-mode result.
  model->Eval();
  gen.ManualSeed(5);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor eval, model->Forward(Tokens(7, 3)));
  ExpectNear(eval.ToVector<float>().value(), kEvalLogits, 5e-6);
}

// Under bf16 autocast (the examples' --amp=bf16) the model runs forward
// and backward (the attention's q/k/v views take bf16 gradients), the
// logits stay within bf16 rounding of the f32 reference (measured 0.010;
// tolerance 0.05; the logits reach 2.0), and the f32 parameters get f32
// gradients.
TEST(GptTest, RunsUnderBf16Autocast) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(Tiny(), gen));
  model->Eval();
  SetFixtureWeights(*model);
  Tensor loss;
  {
    amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
    TANDEM_NN_ASSERT_OK(autocast.status());
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor logits, model->Forward(Tokens(7, 3)));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor f32, logits.To(DType::kF32));
    ExpectNear(f32.ToVector<float>().value(), kEvalLogits, 5e-2);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(loss, Gpt::Loss(logits, Targets()));
  }
  TANDEM_NN_ASSERT_OK(loss.Backward());
  for (const NamedTensor& p : model->NamedParameters()) {
    ASSERT_TRUE(p.tensor.has_grad()) << p.name;
    EXPECT_EQ(p.tensor.grad().dtype(), DType::kF32) << p.name;
  }
}

TEST(GptTest, TiedHeadIsOneParameterWithBothGradients) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(Tiny(), gen));
  SetFixtureWeights(*model);
  int64_t wte_like = 0;
  for (const NamedTensor& p : model->NamedParameters()) {
    if (p.tensor.shape() == Shape{kV, 32}) ++wte_like;
  }
  EXPECT_EQ(wte_like, 1);  // no separate lm_head.weight
  // The embedding gradient has rows for tokens never seen in the input:
  // those come from the head alone (every logit's gradient is non-zero).
  Tensor idx =
      Tensor::FromVector(std::vector<int64_t>(kB * kT, 5), {kB, kT}).value();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor logits, model->Forward(idx));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Gpt::Loss(logits, Targets()));
  TANDEM_NN_ASSERT_OK(loss.Backward());
  std::vector<float> g =
      model->transformer()->wte()->weight().grad().ToVector<float>().value();
  double row0 = 0;
  for (int64_t j = 0; j < 32; ++j) row0 += std::abs(g[j]);
  EXPECT_GT(row0, 0);
}

TEST(GptTest, InitialWeightsFollowHuggingFacesScheme) {
  GptConfig c = Tiny();
  c.n_embd = 64;
  c.vocab_size = 256;
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(c, gen));
  const double proj_std = 0.02 / std::sqrt(2.0 * c.n_layer);
  for (const NamedTensor& p : model->NamedParameters()) {
    SCOPED_TRACE(p.name);
    std::vector<float> v = p.tensor.ToVector<float>().value();
    double sum = 0, sq = 0;
    for (float x : v) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double n = static_cast<double>(v.size());
    const double mean = sum / n, std = std::sqrt(sq / n - mean * mean);
    const bool ln = p.name.find(".ln_") != std::string::npos;
    const bool bias = p.name.find("bias") != std::string::npos;
    if (ln && !bias) {
      EXPECT_EQ(mean, 1.0);
      EXPECT_EQ(std, 0.0);
    } else if (bias) {
      EXPECT_EQ(sq, 0.0);
    } else {
      const bool proj = p.name.find("c_proj.weight") != std::string::npos;
      const double want = proj ? proj_std : 0.02;
      // n >= 4096 draws: the sample std is within 5 % of the true one.
      EXPECT_NEAR(std, want, 0.05 * want);
      EXPECT_NEAR(mean, 0.0, 0.1 * want);
    }
  }
  // Same seed, same weights.
  Generator again(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto twin, Gpt::Create(c, again));
  EXPECT_EQ(model->NamedParameters()[4].tensor.ToVector<float>().value(),
            twin->NamedParameters()[4].tensor.ToVector<float>().value());
}

TEST(GptTest, RefusesBadConfigurationsAndInputs) {
  Generator gen(0);
  GptConfig c = Tiny();
  c.n_head = 5;
  absl::Status s = c.Validate();
  EXPECT_THAT(s.message(),
              HasSubstr("n_embd (32) must be divisible by n_head (5)"));
  EXPECT_FALSE(Gpt::Create(c, gen).ok());
  c = Tiny();
  c.dropout = 1.0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("dropout"));
  c = Tiny();
  c.n_layer = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("n_layer must be >= 1, got 0"));

  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Gpt::Create(Tiny(), gen));
  Tensor too_long =
      Tensor::FromVector(std::vector<int64_t>(17, 1), {1, 17}).value();
  auto r = model->Forward(too_long);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("17 tokens is longer than the model's block_size "
                        "(n_positions) 16"));
  Tensor bad_id =
      Tensor::FromVector(std::vector<int64_t>{1, 64}, {1, 2}).value();
  r = model->Forward(bad_id);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("64"));
}

}  // namespace
}  // namespace tandem::nn
