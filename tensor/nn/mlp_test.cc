// nn::Mlp builds what the same nn.Sequential of Linears and ReLUs builds by
// hand, drawing the same weights from the generator, and nn::Wrapper holds
// it under PyTorch's attribute name.
#include "tensor/nn/mlp.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/test_util.h"
#include "tensor/nn/wrapper.h"

namespace tandem::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const Module& m) {
  std::vector<std::string> names;
  for (const NamedTensor& p : m.NamedParameters()) names.push_back(p.name);
  return names;
}

std::vector<float> Floats(const Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToVector<float>();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<float>();
}

TEST(MlpTest, EqualsTheSequentialBuiltByHand) {
  Generator gen(123);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Sequential> mlp,
                                 Mlp({2, 30, 20, 2}, gen));
  Generator by_hand_gen(123);
  Sequential by_hand;
  TANDEM_NN_ASSERT_OK(by_hand.Append(Linear::Create(2, 30, by_hand_gen)));
  TANDEM_NN_ASSERT_OK(by_hand.Append(std::make_unique<ReLU>()));
  TANDEM_NN_ASSERT_OK(by_hand.Append(Linear::Create(30, 20, by_hand_gen)));
  TANDEM_NN_ASSERT_OK(by_hand.Append(std::make_unique<ReLU>()));
  TANDEM_NN_ASSERT_OK(by_hand.Append(Linear::Create(20, 2, by_hand_gen)));

  EXPECT_EQ(mlp->ToString(), by_hand.ToString());
  EXPECT_THAT(Names(*mlp), ElementsAre("0.weight", "0.bias", "2.weight",
                                       "2.bias", "4.weight", "4.bias"));
  const std::vector<NamedTensor> mine = mlp->NamedParameters();
  const std::vector<NamedTensor> theirs = by_hand.NamedParameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_EQ(Floats(mine[i].tensor), Floats(theirs[i].tensor)) << mine[i].name;
  }
}

TEST(MlpTest, TwoSizesAreOneLinearWithoutReLU) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Sequential> mlp,
                                 Mlp({64, 10}, gen));
  ASSERT_EQ(mlp->size(), 1);
  EXPECT_EQ(mlp->at(0)->type_name(), "Linear");
}

TEST(MlpTest, RefusesFewerThanTwoSizesAndBadSizes) {
  Generator gen(0);
  absl::StatusOr<std::unique_ptr<Sequential>> one = Mlp({5}, gen);
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(one.status().message(),
              HasSubstr("expected at least two sizes (inputs, outputs), "
                        "got 1"));
  EXPECT_FALSE(Mlp({4, -1, 2}, gen).ok());
}

TEST(WrapperTest, NamesTheChildAndForwardsToIt) {
  Generator gen(7);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Wrapper> net,
      Wrapper::Create("NeuralNetwork", "layers", Mlp({2, 3, 2}, gen)));
  EXPECT_EQ(net->type_name(), "NeuralNetwork");
  EXPECT_THAT(Names(*net), ElementsAre("layers.0.weight", "layers.0.bias",
                                       "layers.2.weight", "layers.2.bias"));
  EXPECT_THAT(net->ToString(), HasSubstr("NeuralNetwork(\n  (layers): "
                                         "Sequential("));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor x, Tensor::FromVector<float>({1, -2, 0.5f, 3}, {2, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor out, net->Forward(x));
  Module* layers = net->NamedChildren().at(0).second;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor direct, layers->Forward(x));
  EXPECT_EQ(Floats(out), Floats(direct));
}

TEST(WrapperTest, PassesTheChildsErrorAndRefusesNullOrBadNames) {
  Generator gen(7);
  absl::StatusOr<std::unique_ptr<Wrapper>> failed =
      Wrapper::Create("Net", "layers", Mlp({1}, gen));
  EXPECT_THAT(failed.status().message(), HasSubstr("at least two sizes"));
  EXPECT_EQ(Wrapper::Create("Net", "layers", std::unique_ptr<Module>())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Wrapper::Create("Net", "a.b", Mlp({2, 2}, gen)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::nn
