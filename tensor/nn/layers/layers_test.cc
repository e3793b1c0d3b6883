// Linear, Conv2d, ReLU, Softmax, Flatten and Sequential against PyTorch 1.13
// (Debian python3-torch). Each expected value comes from the Python snippet
// in the comment beside it; values printed with '%.9g' are exact floats.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/init.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/conv2d.h"
#include "tensor/nn/layers/flatten.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<float> Floats(const Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToVector<float>();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<float>();
}

void ExpectNear(const std::vector<float>& actual,
                const std::vector<float>& expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], tolerance) << "element " << i;
  }
}

// Draws a [rows, cols...] f32 tensor uniform in [-1, 1) from `gen`, like
// torch.empty(shape).uniform_(-1, 1).
absl::StatusOr<Tensor> UniformTensor(Shape shape, Generator& gen) {
  absl::StatusOr<Tensor> t = Tensor::Empty(std::move(shape));
  if (!t.ok()) return t;
  absl::Status s = init::Uniform(*t, -1, 1, gen);
  if (!s.ok()) return s;
  return t;
}

TEST(LinearTest, InitMatchesPyTorchBitForBit) {
  // torch.manual_seed(123); l = torch.nn.Linear(2, 30)
  // l.weight.flatten()[:4], l.bias[:3]
  Generator gen(123);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Linear> fc,
                                 Linear::Create(2, 30, gen));
  EXPECT_EQ(fc->weight().shape(), (Shape{30, 2}));
  EXPECT_EQ(fc->bias().shape(), (Shape{30}));
  const std::vector<float> w = Floats(fc->weight());
  const std::vector<float> b = Floats(fc->bias());
  EXPECT_THAT(
      std::vector<float>(w.begin(), w.begin() + 4),
      ElementsAre(-0.288341254f, 0.0234226044f, -0.351190627f, 0.266659558f));
  EXPECT_THAT(std::vector<float>(b.begin(), b.begin() + 3),
              ElementsAre(0.11153017f, 0.584262252f, -0.668215692f));
  EXPECT_TRUE(fc->weight().requires_grad());
  EXPECT_TRUE(fc->weight().is_leaf());
  EXPECT_EQ(fc->ToString(),
            "Linear(in_features=2, out_features=30, bias=True)");
}

TEST(LinearTest, Float64InitUses64BitDraws) {
  // torch.manual_seed(1); l = torch.nn.Linear(3, 2, dtype=torch.float64)
  Generator gen(1);
  Linear::Options options;
  options.dtype = DType::kF64;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Linear> fc,
                                 Linear::Create(3, 2, gen, options));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> w,
                                 fc->weight().ToVector<double>());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> b,
                                 fc->bias().ToVector<double>());
  EXPECT_THAT(w, ElementsAre(-0.50685202000106, -0.31805705956047264,
                             -0.30685876522082661, -0.3728536959091529,
                             0.064741814621122135, -0.45097539245165741));
  EXPECT_THAT(b, ElementsAre(-0.045133907609597894, 0.24059950433412081));
}

TEST(LinearTest, ForwardAndBackwardMatchPyTorch) {
  // torch.manual_seed(0); l = torch.nn.Linear(4, 3)
  // x = torch.empty(2, 4).uniform_(-1, 1); x.requires_grad_(True); y = l(x)
  // (y * torch.tensor([[1., 2., 3.], [-1., .5, 2.]])).sum().backward()
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Linear> fc,
                                 Linear::Create(4, 3, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, UniformTensor({2, 4}, gen));
  TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, fc->Forward(x));
  ExpectNear(Floats(y),
             {-0.369236648f, -0.559979141f, -0.179487407f, -0.644616604f,
              -0.288395882f, -0.243983731f},
             1e-6);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor weights, Tensor::FromVector<float>({1, 2, 3, -1, 0.5, 2}, {2, 3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor weighted, Mul(y, weights));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(weighted));
  TANDEM_NN_ASSERT_OK(loss.Backward());
  ExpectNear(Floats(fc->weight().grad()),
             {0.472506404f, 0.032118082f, -0.230365157f, -0.472140908f,
              -0.143644273f, 0.972278953f, 1.61523962f, -1.4587822f,
              -0.75979495f, 1.91243982f, 3.46084428f, -2.4454236f},
             1e-6);
  ExpectNear(Floats(fc->bias().grad()), {0.0f, 2.5f, 5.0f}, 1e-6);
  ExpectNear(Floats(x.grad()),
             {-0.522013843f, 0.933297992f, -0.884655356f, 0.130071878f,
              -0.181289226f, 0.0634301007f, 0.1043562f, 0.369626522f},
             1e-6);
}

TEST(LinearTest, NoBiasDrawsOnlyTheWeight) {
  Generator gen(3);
  Linear::Options options;
  options.bias = false;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Linear> fc,
                                 Linear::Create(5, 4, gen, options));
  EXPECT_FALSE(fc->bias().defined());
  ASSERT_EQ(fc->NamedParameters().size(), 1u);
  EXPECT_EQ(fc->NamedParameters()[0].name, "weight");
  // The weight took exactly 20 draws.
  Generator reference(3);
  for (int i = 0; i < 20; ++i) reference.Random();
  EXPECT_EQ(gen.Random(), reference.Random());
  EXPECT_EQ(fc->ToString(),
            "Linear(in_features=5, out_features=4, bias=False)");
}

TEST(LinearTest, BadInputShapeIsAClearError) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Linear> fc,
                                 Linear::Create(4, 3, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::Zeros({2, 5}));
  absl::StatusOr<Tensor> y = fc->Forward(x);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(y.status().message(), HasSubstr("expected input [N, 4]"));
  EXPECT_THAT(y.status().message(), HasSubstr("[2, 5]"));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x4, Tensor::Zeros({2, 1, 2, 2}));
  y = fc->Forward(x4);
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("Flatten"));
}

TEST(LinearTest, NegativeSizesAreRejected) {
  Generator gen(0);
  absl::StatusOr<std::unique_ptr<Linear>> fc = Linear::Create(-1, 3, gen);
  ASSERT_FALSE(fc.ok());
  EXPECT_THAT(fc.status().message(), HasSubstr("-1"));
}

TEST(Conv2dTest, InitMatchesPyTorchBitForBit) {
  // torch.manual_seed(5); c = torch.nn.Conv2d(3, 16, 3)
  // c.weight.flatten()[:4], c.weight[15, 2, 2, 2], c.bias[:3], c.bias[15]
  Generator gen(5);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Conv2d> conv,
                                 Conv2d::Create(3, 16, 3, 1, 0, gen));
  EXPECT_EQ(conv->weight().shape(), (Shape{16, 3, 3, 3}));
  const std::vector<float> w = Floats(conv->weight());
  const std::vector<float> b = Floats(conv->bias());
  EXPECT_THAT(
      std::vector<float>(w.begin(), w.begin() + 4),
      ElementsAre(0.127114013f, -0.143909976f, 0.156835154f, 0.123139977f));
  EXPECT_EQ(w[15 * 27 + 2 * 9 + 2 * 3 + 2], 0.147321984f);
  EXPECT_THAT(std::vector<float>(b.begin(), b.begin() + 3),
              ElementsAre(-0.109703556f, 0.0725652426f, 0.181267798f));
  EXPECT_EQ(b[15], 0.0129278181f);
  EXPECT_EQ(conv->ToString(),
            "Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1))");
}

TEST(Conv2dTest, RectangularNoBiasMatchesPyTorch) {
  // torch.manual_seed(2)
  // c = torch.nn.Conv2d(4, 2, (3, 1), stride=(1, 2), padding=(0, 1),
  // bias=False) print(c); c.weight.flatten()[:5]
  Generator gen(2);
  Conv2d::Options options;
  options.bias = false;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Conv2d> conv,
      Conv2d::Create(4, 2, {3, 1}, {1, 2}, {0, 1}, gen, options));
  const std::vector<float> w = Floats(conv->weight());
  EXPECT_THAT(std::vector<float>(w.begin(), w.begin() + 5),
              ElementsAre(0.066219233f, -0.0686972588f, 0.079163f,
                          -0.014744903f, 0.123318456f));
  EXPECT_EQ(conv->ToString(),
            "Conv2d(4, 2, kernel_size=(3, 1), stride=(1, 2), padding=(0, 1), "
            "bias=False)");
}

TEST(Conv2dTest, ForwardMatchesPyTorch) {
  // torch.manual_seed(0); c = torch.nn.Conv2d(2, 3, 3, stride=2, padding=1)
  // x = torch.empty(1, 2, 5, 5).uniform_(-1, 1); y = c(x)
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Conv2d> conv,
                                 Conv2d::Create(2, 3, 3, 2, 1, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, UniformTensor({1, 2, 5, 5}, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, conv->Forward(x));
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 3}));
  ExpectNear(Floats(y),
             {0.0575511083f, 0.669362009f,  0.164709315f,  -0.12528567f,
              0.403318793f,  0.489072084f,  0.245502353f,  0.233262837f,
              0.394919515f,  0.124016777f,  -0.063905403f, -0.205068529f,
              0.504069269f,  -0.319827586f, -0.491086304f, -0.0846319497f,
              -0.369230211f, -0.983096063f, 0.0095571056f, -0.059945032f,
              0.239376307f,  -0.313929349f, -0.451847285f, 0.345527112f,
              0.0778840929f, 0.485275507f,  -0.138432637f},
             1e-6);
}

TEST(Conv2dTest, WrongChannelsIsAClearError) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Conv2d> conv,
                                 Conv2d::Create(3, 4, 3, 1, 1, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::Zeros({1, 2, 5, 5}));
  absl::StatusOr<Tensor> y = conv->Forward(x);
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("expected input [N, 3, H, W]"));
  EXPECT_THAT(y.status().message(), HasSubstr("[1, 2, 5, 5]"));
  EXPECT_FALSE(Conv2d::Create(3, 4, 0, 1, 1, gen).ok());
  EXPECT_FALSE(Conv2d::Create(3, 4, 3, 1, -1, gen).ok());
}

TEST(ActivationTest, ReluSoftmaxFlatten) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor x, Tensor::FromVector<float>({-1, 0, 2, 3, -4, 0.5}, {2, 3}));
  ReLU relu;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor r, relu.Forward(x));
  EXPECT_THAT(Floats(r), ElementsAre(0, 0, 2, 3, 0, 0.5));
  EXPECT_EQ(relu.ToString(), "ReLU()");

  Softmax softmax(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor s, softmax.Forward(x));
  // torch.softmax(torch.tensor([[-1., 0, 2], [3, -4, .5]]), dim=1)
  ExpectNear(Floats(s),
             {0.0420100652f, 0.11419519f, 0.843794703f, 0.923363745f,
              0.000841998728f, 0.0757943094f},
             1e-6);
  EXPECT_EQ(softmax.ToString(), "Softmax(dim=1)");

  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x4, Tensor::Zeros({2, 3, 4, 5}));
  Flatten flatten;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor f, flatten.Forward(x4));
  EXPECT_EQ(f.shape(), (Shape{2, 60}));
  EXPECT_TRUE(f.SharesStorageWith(x4));
  EXPECT_EQ(flatten.ToString(), "Flatten(start_dim=1, end_dim=-1)");
}

// The model of the DDP tutorials, built in PyTorch's order:
// torch.manual_seed(123)
// m = nn.Sequential(nn.Linear(2, 30), nn.ReLU(), nn.Linear(30, 20),
//                   nn.ReLU(), nn.Linear(20, 2), nn.Softmax(dim=1))
absl::StatusOr<std::unique_ptr<Sequential>> TutorialModel(Generator& gen) {
  auto model = std::make_unique<Sequential>();
  for (absl::Status s : {model->Append(Linear::Create(2, 30, gen)),
                         model->Append(std::make_unique<ReLU>()),
                         model->Append(Linear::Create(30, 20, gen)),
                         model->Append(std::make_unique<ReLU>()),
                         model->Append(Linear::Create(20, 2, gen)),
                         model->Append(std::make_unique<Softmax>(1))}) {
    if (!s.ok()) return s;
  }
  return model;
}

TEST(SequentialTest, TutorialModelMatchesPyTorch) {
  Generator gen(123);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Sequential> model,
                                 TutorialModel(gen));
  EXPECT_EQ(model->size(), 6);
  // print(repr(m))
  EXPECT_EQ(model->ToString(),
            "Sequential(\n"
            "  (0): Linear(in_features=2, out_features=30, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Linear(in_features=30, out_features=20, bias=True)\n"
            "  (3): ReLU()\n"
            "  (4): Linear(in_features=20, out_features=2, bias=True)\n"
            "  (5): Softmax(dim=1)\n"
            ")");
  // list(m.state_dict().keys())
  std::vector<std::string> names;
  for (const NamedTensor& p : model->NamedParameters()) names.push_back(p.name);
  EXPECT_THAT(names, ElementsAre("0.weight", "0.bias", "2.weight", "2.bias",
                                 "4.weight", "4.bias"));
  EXPECT_EQ(model->NumParameters(), 30 * 2 + 30 + 20 * 30 + 20 + 2 * 20 + 2);

  // m[2].weight[0, 0], m[4].bias: later layers continue the same stream.
  auto* fc2 = dynamic_cast<Linear*>(model->at(2));
  auto* fc3 = dynamic_cast<Linear*>(model->at(-2));
  ASSERT_NE(fc2, nullptr);
  ASSERT_NE(fc3, nullptr);
  EXPECT_EQ(Floats(fc2->weight())[0], -0.140007466f);
  EXPECT_THAT(Floats(fc3->bias()), ElementsAre(-0.0882182717f, 0.0983677581f));
  EXPECT_EQ(model->at(6), nullptr);

  // m(torch.tensor([[-1.2, 3.1], [-0.9, 2.9], [2.3, -1.1]]))
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor x, Tensor::FromVector<float>(
                    {-1.2f, 3.1f, -0.9f, 2.9f, 2.3f, -1.1f}, {3, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, model->Forward(x));
  ExpectNear(Floats(y),
             {0.474828631f, 0.52517134f, 0.474644512f, 0.525355458f,
              0.446342677f, 0.553657353f},
             1e-6);
}

TEST(SequentialTest, NestedReprMatchesPyTorch) {
  // print(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(),
  //                     nn.Sequential(nn.Linear(8, 2))))
  Generator gen(0);
  Sequential model;
  TANDEM_NN_ASSERT_OK(model.Append(Conv2d::Create(3, 8, 3, 1, 1, gen)));
  TANDEM_NN_ASSERT_OK(model.Append(std::make_unique<Flatten>()));
  auto inner = std::make_unique<Sequential>();
  TANDEM_NN_ASSERT_OK(inner->Append(Linear::Create(8, 2, gen)));
  TANDEM_NN_ASSERT_OK(model.Append(std::move(inner)));
  EXPECT_EQ(model.ToString(),
            "Sequential(\n"
            "  (0): Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), "
            "padding=(1, 1))\n"
            "  (1): Flatten(start_dim=1, end_dim=-1)\n"
            "  (2): Sequential(\n"
            "    (0): Linear(in_features=8, out_features=2, bias=True)\n"
            "  )\n"
            ")");
  std::vector<std::string> names;
  for (const NamedTensor& p : model.NamedParameters()) names.push_back(p.name);
  EXPECT_THAT(names,
              ElementsAre("0.weight", "0.bias", "2.0.weight", "2.0.bias"));
}

TEST(SequentialTest, ErrorsNameTheLayer) {
  Generator gen(0);
  Sequential model;
  TANDEM_NN_ASSERT_OK(model.Append(Linear::Create(2, 3, gen)));
  TANDEM_NN_ASSERT_OK(model.Append(Linear::Create(4, 1, gen)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::Zeros({5, 2}));
  absl::StatusOr<Tensor> y = model.Forward(x);
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("Sequential layer 1 (Linear)"));
  EXPECT_THAT(y.status().message(), HasSubstr("[5, 3]"));

  EXPECT_FALSE(model.Append(std::unique_ptr<Module>()).ok());
  absl::Status s = model.Append(Linear::Create(-2, 1, gen));
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(model.size(), 2);
}

TEST(SequentialTest, EmptyIsIdentity) {
  Sequential model;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::Ones({2, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, model.Forward(x));
  EXPECT_TRUE(y.SharesStorageWith(x));
  EXPECT_EQ(model.ToString(), "Sequential()");
}

}  // namespace
}  // namespace tandem::nn
