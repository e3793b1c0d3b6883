// End-to-end training with nn modules and the optimizers: the DDP tutorials'
// toy model against PyTorch's loss trajectory, and an MLP that must fit a
// dataset that is not linearly separable.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/optimizer.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using nn::Linear;
using nn::ReLU;
using nn::Sequential;

// nn.Sequential(nn.Linear(2, hidden1), nn.ReLU(), nn.Linear(hidden1,
// hidden2), nn.ReLU(), nn.Linear(hidden2, 2)), built in PyTorch's order.
absl::StatusOr<std::unique_ptr<Sequential>> Mlp(int64_t hidden1,
                                                int64_t hidden2,
                                                Generator& gen) {
  auto model = std::make_unique<Sequential>();
  for (absl::Status s : {model->Append(Linear::Create(2, hidden1, gen)),
                         model->Append(std::make_unique<ReLU>()),
                         model->Append(Linear::Create(hidden1, hidden2, gen)),
                         model->Append(std::make_unique<ReLU>()),
                         model->Append(Linear::Create(hidden2, 2, gen))}) {
    if (!s.ok()) return s;
  }
  return model;
}

// One optimisation step on rows [begin, end) of (x, y); returns the loss.
absl::StatusOr<double> TrainStep(nn::Module& model, Optimizer& opt,
                                 const Tensor& x, const Tensor& y,
                                 int64_t begin, int64_t end) {
  absl::StatusOr<Tensor> xb = x.View(begin * 2, {end - begin, 2});
  if (!xb.ok()) return xb.status();
  absl::StatusOr<Tensor> yb = y.View(begin, {end - begin});
  if (!yb.ok()) return yb.status();
  absl::StatusOr<Tensor> logits = model.Forward(*xb);
  if (!logits.ok()) return logits.status();
  absl::StatusOr<Tensor> loss = CrossEntropy(*logits, *yb);
  if (!loss.ok()) return loss.status();
  opt.ZeroGrad();
  absl::Status s = loss->Backward();
  if (!s.ok()) return s;
  s = opt.Step();
  if (!s.ok()) return s;
  return loss->Item();
}

absl::StatusOr<double> Accuracy(nn::Module& model, const Tensor& x,
                                const Tensor& y) {
  NoGradGuard no_grad;
  absl::StatusOr<Tensor> logits = model.Forward(x);
  if (!logits.ok()) return logits.status();
  absl::StatusOr<Tensor> predicted = Argmax(*logits, 1);
  if (!predicted.ok()) return predicted.status();
  const std::vector<int64_t> p = *predicted->ToVector<int64_t>();
  const std::vector<int64_t> truth = *y.ToVector<int64_t>();
  int64_t correct = 0;
  for (size_t i = 0; i < p.size(); ++i) correct += p[i] == truth[i];
  return static_cast<double>(correct) / static_cast<double>(p.size());
}

// The tutorials' data set and loop, without shuffling:
//   torch.manual_seed(123)
//   m = nn.Sequential(nn.Linear(2, 30), nn.ReLU(), nn.Linear(30, 20),
//                     nn.ReLU(), nn.Linear(20, 2))
//   X = torch.tensor([[-1.2, 3.1], [-0.9, 2.9], [-0.5, 2.6], [2.3, -1.1],
//                     [2.7, -1.5]]); y = torch.tensor([0, 0, 0, 1, 1])
//   opt = <optimizer>(m.parameters(), ...)
//   for epoch in range(3):
//     for s in range(0, 5, 2):
//       loss = F.cross_entropy(m(X[s:s+2]), y[s:s+2])
//       opt.zero_grad(); loss.backward(); opt.step(); print(loss.item())
class TutorialTest : public testing::Test {
 protected:
  void SetUp() override {
    Generator gen(123);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(model_, Mlp(30, 20, gen));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        x_, Tensor::FromVector<float>({-1.2f, 3.1f, -0.9f, 2.9f, -0.5f, 2.6f,
                                       2.3f, -1.1f, 2.7f, -1.5f},
                                      {5, 2}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        y_, Tensor::FromVector<int64_t>({0, 0, 0, 1, 1}));
  }

  void ExpectTrajectory(Optimizer& opt, const std::vector<double>& expected) {
    std::vector<double> losses;
    for (int epoch = 0; epoch < 3; ++epoch) {
      for (int64_t s = 0; s < 5; s += 2) {
        TANDEM_NN_ASSERT_OK_AND_ASSIGN(
            double loss,
            TrainStep(*model_, opt, x_, y_, s, s + 2 < 5 ? s + 2 : 5));
        losses.push_back(loss);
      }
    }
    ASSERT_EQ(losses.size(), expected.size());
    for (size_t i = 0; i < losses.size(); ++i) {
      // Float rounding only: BLAS may sum in another order than PyTorch.
      EXPECT_NEAR(losses[i], expected[i], 2e-5 + 1e-4 * expected[i])
          << "step " << i;
    }
  }

  std::vector<float> FirstLayerWeights() {
    auto* fc = dynamic_cast<Linear*>(model_->at(0));
    std::vector<float> w = *fc->weight().ToVector<float>();
    return std::vector<float>(w.begin(), w.begin() + 3);
  }
  std::vector<float> LastBias() {
    auto* fc = dynamic_cast<Linear*>(model_->at(4));
    return *fc->bias().ToVector<float>();
  }

  std::unique_ptr<Sequential> model_;
  Tensor x_;
  Tensor y_;
};

TEST_F(TutorialTest, SgdFollowsPyTorch) {
  // opt = torch.optim.SGD(m.parameters(), lr=0.5)
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd,
                                 Sgd::Create(model_->Parameters(), 0.5));
  ExpectTrajectory(
      sgd, {0.744995236, 0.653779566, 0.416455656, 0.0517055318, 0.0407880098,
            0.0226330925, 0.00413443148, 0.0170503724, 0.00902206451});
  // m[0].weight.flatten()[:3], m[4].bias
  const std::vector<float> w = FirstLayerWeights();
  const std::vector<float> expected_w = {-0.315582335f, 0.105995551f,
                                         -0.353763014f};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i], expected_w[i], 1e-5);
  const std::vector<float> b = LastBias();
  EXPECT_NEAR(b[0], -0.17050603f, 1e-5);
  EXPECT_NEAR(b[1], 0.180655509f, 1e-5);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double accuracy, Accuracy(*model_, x_, y_));
  EXPECT_EQ(accuracy, 1.0);
}

TEST_F(TutorialTest, AdamWFollowsPyTorch) {
  // opt = torch.optim.AdamW(m.parameters(), lr=0.01)
  AdamWOptions options;
  options.lr = 0.01;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(AdamW adam,
                                 AdamW::Create(model_->Parameters(), options));
  ExpectTrajectory(
      adam, {0.744995236, 0.632138371, 0.590049207, 0.436696559, 0.475759447,
             0.491712511, 0.227931082, 0.346219033, 0.399875373});
  const std::vector<float> w = FirstLayerWeights();
  const std::vector<float> expected_w = {-0.34727627f, 0.0868916884f,
                                         -0.356606454f};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i], expected_w[i], 1e-5);
  const std::vector<float> b = LastBias();
  EXPECT_NEAR(b[0], -0.0697347224f, 1e-5);
  EXPECT_NEAR(b[1], 0.0798750743f, 1e-5);
}

// Four Gaussian clusters at (+-2, +-2), label 1 where x * y > 0: no linear
// model separates them, an MLP must.
struct XorData {
  Tensor x;
  Tensor y;
};
absl::StatusOr<XorData> MakeXor(int64_t n, Generator& gen) {
  std::vector<float> noise(n * 2);
  gen.Normal(noise.data(), n * 2, 0.0f, 0.5f);
  std::vector<float> xs(n * 2);
  std::vector<int64_t> ys(n);
  for (int64_t i = 0; i < n; ++i) {
    const float cx = (i % 2 == 0) ? 2.0f : -2.0f;
    const float cy = ((i / 2) % 2 == 0) ? 2.0f : -2.0f;
    xs[2 * i] = cx + noise[2 * i];
    xs[2 * i + 1] = cy + noise[2 * i + 1];
    ys[i] = (cx * cy > 0) ? 1 : 0;
  }
  absl::StatusOr<Tensor> x = Tensor::FromVector<float>(xs, {n, 2});
  if (!x.ok()) return x.status();
  absl::StatusOr<Tensor> y = Tensor::FromVector<int64_t>(ys);
  if (!y.ok()) return y.status();
  return XorData{*x, *y};
}

TEST(MlpTrainingTest, SgdWithMomentumFitsXor) {
  Generator gen(2024);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(XorData data, MakeXor(80, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Sequential> model,
                                 Mlp(16, 16, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double before,
                                 Accuracy(*model, data.x, data.y));
  SgdOptions options;
  options.momentum = 0.9;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Sgd sgd, Sgd::Create(model->Parameters(), 0.05, options));
  double first_loss = 0;
  double last_loss = 0;
  for (int epoch = 0; epoch < 30; ++epoch) {
    for (int64_t s = 0; s < 80; s += 16) {
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(
          double loss, TrainStep(*model, sgd, data.x, data.y, s, s + 16));
      if (epoch == 0 && s == 0) first_loss = loss;
      last_loss = loss;
    }
  }
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double after,
                                 Accuracy(*model, data.x, data.y));
  EXPECT_LT(before, 0.9);
  EXPECT_EQ(after, 1.0);
  EXPECT_LT(last_loss, first_loss / 10);
}

TEST(MlpTrainingTest, AdamWFitsXor) {
  Generator gen(7);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(XorData data, MakeXor(80, gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Sequential> model,
                                 Mlp(16, 16, gen));
  AdamWOptions options;
  options.lr = 0.01;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(AdamW adam,
                                 AdamW::Create(model->Parameters(), options));
  for (int epoch = 0; epoch < 30; ++epoch) {
    for (int64_t s = 0; s < 80; s += 16) {
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(
          double loss, TrainStep(*model, adam, data.x, data.y, s, s + 16));
      (void)loss;
    }
  }
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(double after,
                                 Accuracy(*model, data.x, data.y));
  EXPECT_EQ(after, 1.0);
}

}  // namespace
}  // namespace tandem::optim
