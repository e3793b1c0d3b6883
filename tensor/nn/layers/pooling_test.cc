// nn::MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (the ops' values are checked
// against PyTorch in tensor/ops/pool_test.cc; here: the modules forward to
// them and print as PyTorch does) and nn::Residual.
#include "tensor/nn/layers/pooling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"

namespace tandem::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<double> Values(const Tensor& t) {
  return t.To(DType::kF64).value().ToVector<double>().value();
}

// The strings are PyTorch 1.13's repr of the same modules, e.g.
// repr(torch.nn.MaxPool2d(3, 2, 1)).
TEST(PoolingModulesTest, ReprLikePyTorch) {
  EXPECT_EQ(MaxPool2d(3, 2, 1).ToString(),
            "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, "
            "ceil_mode=False)");
  EXPECT_EQ(MaxPool2d(MaxPool2dOptions{.kernel = {2, 3}}).ToString(),
            "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, "
            "dilation=1, ceil_mode=False)");
  EXPECT_EQ(AvgPool2d(3).ToString(),
            "AvgPool2d(kernel_size=3, stride=3, padding=0)");
  EXPECT_EQ(AdaptiveAvgPool2d({1, 1}).ToString(),
            "AdaptiveAvgPool2d(output_size=(1, 1))");
}

TEST(PoolingModulesTest, ForwardIsTheOp) {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i;
  Tensor x = Tensor::FromVector(v, {1, 1, 4, 4}).value();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor m, MaxPool2d(3, 2, 1).Forward(x));
  EXPECT_THAT(Values(m), ElementsAre(5, 7, 13, 15));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, AvgPool2d(2).Forward(x));
  EXPECT_THAT(Values(a), ElementsAre(2.5, 4.5, 10.5, 12.5));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor g,
                                 AdaptiveAvgPool2d({1, 1}).Forward(x));
  EXPECT_THAT(Values(g), ElementsAre(7.5));
  // The op's check, at Forward.
  absl::StatusOr<Tensor> bad = MaxPool2d(3, 1, 2).Forward(x);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("at most half of kernel"));
}

// y = relu(x) + x: dy/dx is 2 where x > 0 and 1 elsewhere, so both
// branches' gradients arrive.
TEST(ResidualTest, IdentityShortcut) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto block,
                                 Residual::Create(std::make_unique<ReLU>()));
  EXPECT_EQ(block->shortcut(), nullptr);
  Tensor x = Tensor::FromVector(std::vector<double>{-1.5, 0.0, 2.0}).value();
  TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, block->Forward(x));
  EXPECT_THAT(Values(y), ElementsAre(-1.5, 0.0, 4.0));
  TANDEM_NN_ASSERT_OK(Sum(y).value().Backward());
  EXPECT_THAT(Values(x.grad()), ElementsAre(1, 1, 2));
  EXPECT_EQ(block->ToString(), "Residual(\n  (body): ReLU()\n)");
}

// A module shortcut: y = relu(x) + (x W^T + b); its parameters are named
// "shortcut.*" and get gradients; x's gradient is 1[x > 0] + column sums
// of W.
TEST(ResidualTest, ModuleShortcut) {
  Generator gen(3);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      auto fc, Linear::Create(2, 2, gen, {.dtype = DType::kF64}));
  const std::vector<double> w = Values(fc->weight());
  const std::vector<double> b = Values(fc->bias());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      auto block, Residual::Create(std::make_unique<ReLU>(), std::move(fc)));
  std::vector<std::string> names;
  for (const auto& p : block->NamedParameters()) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("shortcut.weight", "shortcut.bias"));
  Tensor x = Tensor::FromVector(std::vector<double>{-1.0, 3.0}, {1, 2}).value();
  TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, block->Forward(x));
  const std::vector<double> yv = Values(y);
  EXPECT_DOUBLE_EQ(yv[0], 0.0 + (-1.0 * w[0] + 3.0 * w[1] + b[0]));
  EXPECT_DOUBLE_EQ(yv[1], 3.0 + (-1.0 * w[2] + 3.0 * w[3] + b[1]));
  TANDEM_NN_ASSERT_OK(Sum(y).value().Backward());
  const std::vector<double> gx = Values(x.grad());
  EXPECT_DOUBLE_EQ(gx[0], 0.0 + (w[0] + w[2]));
  EXPECT_DOUBLE_EQ(gx[1], 1.0 + (w[1] + w[3]));
  EXPECT_THAT(Values(block->shortcut()->Parameters()[0].grad()),
              ElementsAre(-1.0, 3.0, -1.0, 3.0));
}

TEST(ResidualTest, Errors) {
  absl::StatusOr<std::unique_ptr<Residual>> none = Residual::Create(nullptr);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("body is null"));
  // A body that changes the shape needs a shortcut that does too.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      auto block, Residual::Create(std::make_unique<MaxPool2d>(2)));
  absl::StatusOr<Tensor> y =
      block->Forward(Tensor::Zeros({1, 1, 4, 4}).value());
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(),
              HasSubstr("the body gives [1, 1, 2, 2] but the shortcut gives "
                        "[1, 1, 4, 4]"));
}

}  // namespace
}  // namespace tandem::nn
