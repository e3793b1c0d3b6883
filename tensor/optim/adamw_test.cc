#include "tensor/optim/adamw.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/test_util.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kPicks[] = {0, 7, 17, 31, 36};
constexpr int64_t kSize = 37;

// The PyTorch side (python3, torch 1.13), as in sgd_test.cc:
//
//   def run(kind, n, steps, dtype=torch.float32, **kw):
//       torch.manual_seed(1)
//       p = torch.nn.Parameter(torch.empty(n, dtype=dtype).uniform_(-1, 1))
//       opt = getattr(torch.optim, kind)([p], **kw)
//       for s in range(steps):
//           p.grad = torch.empty(n, dtype=dtype).uniform_(-1, 1)
//           opt.step()
//       return p.detach()
//   r = run("AdamW", 37, steps, **kw); ["%.9g" % r[i] for i in (0, 7, 17, 31,
//   36)]
template <typename T>
std::vector<T> RunSteps(int steps, AdamWOptions options) {
  Generator gen(1);
  std::vector<T> init(kSize);
  gen.Uniform(init.data(), kSize, T(-1), T(1));
  absl::StatusOr<Tensor> p = Tensor::FromVector<T>(init);
  EXPECT_TRUE(p.ok());
  EXPECT_TRUE(p->set_requires_grad(true).ok());
  absl::StatusOr<AdamW> adam = AdamW::Create({*p}, options);
  EXPECT_TRUE(adam.ok()) << adam.status();
  if (!adam.ok()) return {};
  for (int s = 0; s < steps; ++s) {
    std::vector<T> g(kSize);
    gen.Uniform(g.data(), kSize, T(-1), T(1));
    EXPECT_TRUE(p->set_grad(*Tensor::FromVector<T>(g)).ok());
    absl::Status st = adam->Step();
    EXPECT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ(adam->step_count(0), steps);
  std::vector<T> all = *p->ToVector<T>();
  std::vector<T> picked;
  for (int64_t i : kPicks) picked.push_back(all[i]);
  return picked;
}

struct Case {
  std::string name;
  AdamWOptions options;
  std::vector<float> after1;
  std::vector<float> after5;
};

AdamWOptions Opts(double lr, double beta1, double beta2, double eps,
                  double weight_decay, bool amsgrad = false,
                  bool maximize = false) {
  AdamWOptions o;
  o.lr = lr;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.eps = eps;
  o.weight_decay = weight_decay;
  o.amsgrad = amsgrad;
  o.maximize = maximize;
  return o;
}

class AdamWMatchesPyTorch : public testing::TestWithParam<Case> {};

TEST_P(AdamWMatchesPyTorch, OneAndFiveSteps) {
  const Case& c = GetParam();
  EXPECT_THAT(RunSteps<float>(1, c.options), ElementsAreArray(c.after1));
  EXPECT_THAT(RunSteps<float>(5, c.options), ElementsAreArray(c.after5));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AdamWMatchesPyTorch,
    testing::Values(
        // run("AdamW", 37, n): PyTorch's defaults.
        Case{"defaults",
             AdamWOptions(),
             {0.516258001f, 0.509738803f, -0.00499478215f, 0.949545979f,
              0.877102911f},
             {0.51350683f, 0.513683438f, -0.00631205738f, 0.951938629f,
              0.874950409f}},
        // run("AdamW", 37, n, lr=0.01, weight_decay=0.1, betas=(0.8, 0.99),
        //     eps=1e-6)
        Case{"custom",
             Opts(0.01, 0.8, 0.99, 1e-6, 0.1),
             {0.524747849f, 0.518235147f, -0.0139908195f, 0.957606912f,
              0.867233813f},
             {0.492641866f, 0.555866778f, -0.0266608596f, 0.975520909f,
              0.842469513f}},
        // run("AdamW", 37, n, lr=0.05, amsgrad=True, maximize=True)
        Case{"amsgrad_maximize",
             Opts(0.05, 0.9, 0.999, 1e-8, 0.01, true, true),
             {0.465005547f, 0.458489507f, 0.0460071675f, 0.898081183f,
              0.927672684f},
             {0.600521743f, 0.259463489f, 0.111757629f, 0.774879098f,
              1.03158176f}}),
    [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(AdamWTest, Float64MatchesPyTorch) {
  // run("AdamW", 37, 5, dtype=torch.float64, lr=0.01)
  EXPECT_THAT(RunSteps<double>(5, Opts(0.01, 0.9, 0.999, 1e-8, 0.01)),
              ElementsAre(-0.85645218095725273, 0.46380618889596142,
                          -0.61511807232567384, -0.18183521814816245,
                          0.89446782718870554));
}

TEST(AdamWTest, SkipsParametersWithoutGradientAndCountsStepsPerParameter) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, Tensor::Ones({2}));
  TANDEM_NN_ASSERT_OK(a.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK(b.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK(a.set_grad(*Tensor::Full({3}, 0.5)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(AdamW adam, AdamW::Create({a, b}));
  void* a_data = a.raw_data();
  TANDEM_NN_ASSERT_OK(adam.Step());
  TANDEM_NN_ASSERT_OK(adam.Step());
  EXPECT_EQ(a.raw_data(), a_data);  // in place
  EXPECT_EQ(adam.step_count(0), 2);
  EXPECT_EQ(adam.step_count(1), 0);
  EXPECT_FALSE(adam.exp_avg(1).defined());
  EXPECT_THAT(*b.ToVector<float>(), ElementsAre(1, 1));
  // A constant gradient moves each step by about lr (Adam's normalisation),
  // plus the decoupled decay: 1 - 2 * (1e-3 + 1e-5) within float rounding.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> a_values,
                                 a.ToVector<float>());
  for (float v : a_values) EXPECT_NEAR(v, 1 - 2 * 1.01e-3, 1e-6);
  // b's first step later starts its own count (bias correction from t = 1).
  TANDEM_NN_ASSERT_OK(b.set_grad(*Tensor::Full({2}, -0.5)));
  TANDEM_NN_ASSERT_OK(adam.Step());
  EXPECT_EQ(adam.step_count(0), 3);
  EXPECT_EQ(adam.step_count(1), 1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> b_values,
                                 b.ToVector<float>());
  for (float v : b_values) EXPECT_NEAR(v, 1 - 1e-5 + 1e-3, 1e-6);
}

TEST(AdamWTest, InvalidArgumentsAreRejected) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  EXPECT_THAT(
      AdamW::Create({a}, Opts(-1, 0.9, 0.999, 1e-8, 0.01)).status().message(),
      HasSubstr("learning rate"));
  EXPECT_THAT(
      AdamW::Create({a}, Opts(1e-3, 1.0, 0.999, 1e-8, 0.01)).status().message(),
      HasSubstr("beta parameter at index 0"));
  EXPECT_THAT(
      AdamW::Create({a}, Opts(1e-3, 0.9, 0.999, -1, 0.01)).status().message(),
      HasSubstr("eps"));
  EXPECT_THAT(AdamW::Create({a}, Opts(1e-3, 0.9, 0.999, 1e-8, -0.01))
                  .status()
                  .message(),
              HasSubstr("weight_decay"));
  EXPECT_THAT(AdamW::Create(std::vector<Tensor>{}).status().message(),
              HasSubstr("empty parameter list"));
}

// PyTorch's rules in PyTorch's words, plus: every hyper-parameter finite.
TEST(AdamWTest, HyperParametersFollowPyTorchsRulesAndMustBeFinite) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto message = [&](double lr, double b1, double b2, double eps, double wd) {
    return std::string(
        AdamW::Create({a}, Opts(lr, b1, b2, eps, wd)).status().message());
  };
  EXPECT_THAT(message(inf, 0.9, 0.999, 1e-8, 0.01),
              HasSubstr("AdamW: Invalid learning rate: inf (lr must be finite "
                        "and >= 0)"));
  EXPECT_THAT(message(1e-3, -0.1, 0.999, 1e-8, 0.01),
              HasSubstr("Invalid beta parameter at index 0: -0.1 (beta1 must "
                        "be finite and in [0, 1))"));
  EXPECT_THAT(message(1e-3, 0.9, 1, 1e-8, 0.01),
              HasSubstr("Invalid beta parameter at index 1: 1"));
  EXPECT_THAT(message(1e-3, 0.9, nan, 1e-8, 0.01),
              HasSubstr("Invalid beta parameter at index 1: nan"));
  EXPECT_THAT(message(1e-3, 0.9, 0.999, -1, 0.01),
              HasSubstr("Invalid epsilon value: -1"));
  EXPECT_THAT(message(1e-3, 0.9, 0.999, inf, 0.01),
              HasSubstr("Invalid epsilon value: inf"));
  EXPECT_THAT(message(1e-3, 0.9, 0.999, 1e-8, nan),
              HasSubstr("Invalid weight_decay value: nan"));
  // The boundaries PyTorch accepts stay accepted.
  EXPECT_TRUE(AdamW::Create({a}, Opts(0, 0, 0, 0, 0)).ok());
}

}  // namespace
}  // namespace tandem::optim
