// The GPT layers (nn::Embedding, nn::Dropout): initial weights bit for bit
// against PyTorch 1.13, forward through the ops, train/eval behaviour.
//
// The weights were printed by /usr/bin/python3 (torch 1.13):
//   torch.manual_seed(7); torch.nn.Embedding(3, 4).weight            # n < 16
//   torch.manual_seed(7); torch.nn.Embedding(3, 4, dtype=torch.float64).weight
//   torch.manual_seed(11); torch.nn.Embedding(5, 7).weight           # n >= 16
//   torch.manual_seed(11); torch.nn.Embedding(5, 7, dtype=torch.float64).weight
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/generator.h"
#include "tensor/nn/layers/dropout.h"
#include "tensor/nn/layers/embedding.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

using ::testing::HasSubstr;

const std::vector<float> kSeed7F32 = {
    -0.1467950940132141f, 0.7861412763595581f, 0.9468216300010681f,
    -1.1143440008163452f, 1.6907901763916016f, -0.8948279023170471f,
    -0.3556250333786011f, 1.2323857545852661f, 0.13817265629768372f,
    -1.6821985244750977f, 0.317678302526474f,  0.13280697166919708f};
const std::vector<double> kSeed7F64 = {
    -0.1467950974849952, 0.7861412987235358,  0.9468216090039564,
    -1.1143440212610307, 1.6907901257942333,  -0.8948278791726386,
    -0.3556250270062136, 1.2323857451651945,  0.13817266368739245,
    -1.6821984860536687, 0.31767831539796804, 0.13280696453151092};
const std::vector<float> kSeed11F32 = {
    -0.5107975602149963f,   1.0282717943191528f,   -0.3531515896320343f,
    0.12299131602048874f,   -0.18155446648597717f, -1.4972281455993652f,
    0.14210453629493713f,   -0.5242824554443359f,  -0.24873711168766022f,
    -0.5252376198768616f,   2.8922135829925537f,   -0.5947133898735046f,
    1.311833143234253f,     0.3521793782711029f,   -1.315124273300171f,
    -0.007992205210030079f, 0.2478800266981125f,   1.57270348072052f,
    -1.6394644975662231f,   0.1383378505706787f,   0.4961748719215393f,
    -0.6052795052528381f,   -0.8006939888000488f,  0.15865179896354675f,
    -0.7244579792022705f,   0.7690765857696533f,   -1.139638066291809f,
    0.37349072098731995f,   2.995054006576538f,    -0.2569432556629181f,
    -0.6837973594665527f,   1.062118649482727f,    -0.4301305413246155f,
    1.7798348665237427f,    0.05728941783308983f};
const std::vector<double> kSeed11F64 = {
    0.27837984592949944,  -1.8736145168964604,  1.4606952818041987,
    -0.5314479952161992,  -0.28024234096141765, -0.5534924027429814,
    0.5078845851492793,   0.5386378298124714,   -0.5913690382419431,
    0.9057075227226032,   -0.3051154259138935,  -1.37945639932977,
    -1.281460555263959,   0.17256580880845557,  0.3564301565256936,
    0.06826324999477691,  -1.0130325541351906,  0.370698928077673,
    -1.1724706208069549,  1.554078005592025,    0.9714646586084271,
    -0.8743988011012553,  0.5455021697316776,   -0.028432399278394815,
    -0.25452815368523873, -1.285636380305591,   -0.8048143724875595,
    0.6733398383614413,   1.2293277437921089,   0.22459959617826433,
    0.5600763981546125,   0.45917573840835546,  1.028988359138421,
    -0.9934706396720335,  -0.6295785747320786};

TEST(EmbeddingModuleTest, InitialWeightsEqualPyTorchs) {
  {
    Generator gen(7);
    auto e = Embedding::Create(3, 4, gen).value();
    EXPECT_EQ(e->weight().shape(), (Shape{3, 4}));
    EXPECT_EQ(e->weight().ToVector<float>().value(), kSeed7F32);
  }
  {
    Generator gen(7);
    auto e = Embedding::Create(3, 4, gen, DType::kF64).value();
    EXPECT_EQ(e->weight().ToVector<double>().value(), kSeed7F64);
  }
  {
    Generator gen(11);
    auto e = Embedding::Create(5, 7, gen).value();
    EXPECT_EQ(e->weight().ToVector<float>().value(), kSeed11F32);
  }
  {
    Generator gen(11);
    auto e = Embedding::Create(5, 7, gen, DType::kF64).value();
    EXPECT_EQ(e->weight().ToVector<double>().value(), kSeed11F64);
  }
}

TEST(EmbeddingModuleTest, ForwardLooksUpRowsAndTrainsTheWeight) {
  Generator gen(7);
  auto e = Embedding::Create(3, 4, gen).value();
  EXPECT_EQ(e->ExtraRepr(), "3, 4");
  Tensor idx = Tensor::FromVector(std::vector<int64_t>{2, 0}).value();
  Tensor y = e->Forward(idx).value();
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  const std::vector<float> yv = y.ToVector<float>().value();
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(yv[k], kSeed7F32[8 + k]);
    EXPECT_EQ(yv[4 + k], kSeed7F32[k]);
  }
  ASSERT_TRUE(Sum(y).value().Backward().ok());
  EXPECT_EQ(e->weight().grad().ToVector<float>().value(),
            (std::vector<float>{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}));
}

TEST(EmbeddingModuleTest, RefusesBadSizes) {
  Generator gen(1);
  auto bad = Embedding::Create(-1, 4, gen);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("num_embeddings and embedding_dim must be >= 0, got "
                        "-1 and 4"));
  EXPECT_THAT(Embedding::Create(2, 2, gen, DType::kI64).status().message(),
              HasSubstr("dtype must be f32 or f64, got i64"));
}

TEST(DropoutModuleTest, TrainsWithTheGivenGeneratorAndIsOffInEval) {
  Generator gen(3), same(3);
  auto drop = Dropout::Create(0.3, gen).value();
  EXPECT_EQ(drop->ExtraRepr(), "p=0.3, inplace=False");
  Tensor x = Tensor::Ones({64}, DType::kF64).value();
  Tensor y = drop->Forward(x).value();
  // The op's mask from the same stream.
  EXPECT_EQ(
      y.ToVector<double>().value(),
      ::tandem::Dropout(x, 0.3, true, same).value().ToVector<double>().value());
  drop->Eval();
  Tensor e = drop->Forward(x).value();
  EXPECT_EQ(e.raw_data(), x.raw_data());
  EXPECT_EQ(gen.Random(), same.Random());  // eval drew nothing
}

TEST(DropoutModuleTest, RefusesPOutsideZeroOne) {
  Generator gen(1);
  EXPECT_THAT(Dropout::Create(-0.5, gen).status().message(),
              HasSubstr("p must be in [0, 1], got -0.5"));
}

}  // namespace
}  // namespace tandem::nn
