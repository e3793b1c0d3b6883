#include "tensor/optim/sgd.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// The elements the expectations pin: first, middle, and the tail that
// PyTorch's vectorised kernels handle in scalar code (37 = 32 + 5).
constexpr int64_t kPicks[] = {0, 7, 17, 31, 36};
constexpr int64_t kSize = 37;

// The PyTorch side of every expectation below (python3, torch 1.13):
//
//   def run(kind, n, steps, dtype=torch.float32, **kw):
//       torch.manual_seed(1)
//       p = torch.nn.Parameter(torch.empty(n, dtype=dtype).uniform_(-1, 1))
//       opt = getattr(torch.optim, kind)([p], **kw)
//       for s in range(steps):
//           p.grad = torch.empty(n, dtype=dtype).uniform_(-1, 1)
//           opt.step()
//       return p.detach()
//   r = run("SGD", 37, steps, **kw); ["%.9g" % r[i] for i in (0, 7, 17, 31,
//   36)]
//
// Run replays it: the same generator stream gives the same parameter and
// gradients, and the expectations are exact (EXPECT_EQ on floats).
template <typename T>
std::vector<T> RunSteps(int steps, double lr, SgdOptions options) {
  Generator gen(1);
  std::vector<T> init(kSize);
  gen.Uniform(init.data(), kSize, T(-1), T(1));
  absl::StatusOr<Tensor> p = Tensor::FromVector<T>(init);
  EXPECT_TRUE(p.ok());
  EXPECT_TRUE(p->set_requires_grad(true).ok());
  absl::StatusOr<Sgd> sgd = Sgd::Create({*p}, lr, options);
  EXPECT_TRUE(sgd.ok()) << sgd.status();
  if (!sgd.ok()) return {};
  for (int s = 0; s < steps; ++s) {
    std::vector<T> g(kSize);
    gen.Uniform(g.data(), kSize, T(-1), T(1));
    absl::StatusOr<Tensor> grad = Tensor::FromVector<T>(g);
    EXPECT_TRUE(p->set_grad(*grad).ok());
    absl::Status st = sgd->Step();
    EXPECT_TRUE(st.ok()) << st;
  }
  std::vector<T> all = *p->ToVector<T>();
  std::vector<T> picked;
  for (int64_t i : kPicks) picked.push_back(all[i]);
  return picked;
}

struct Case {
  std::string name;
  double lr;
  SgdOptions options;
  std::vector<float> after1;
  std::vector<float> after5;
};

SgdOptions Opts(double momentum, double dampening, double weight_decay,
                bool nesterov, bool maximize = false) {
  SgdOptions o;
  o.momentum = momentum;
  o.dampening = dampening;
  o.weight_decay = weight_decay;
  o.nesterov = nesterov;
  o.maximize = maximize;
  return o;
}

class SgdMatchesPyTorch : public testing::TestWithParam<Case> {};

TEST_P(SgdMatchesPyTorch, OneAndFiveSteps) {
  const Case& c = GetParam();
  EXPECT_THAT(RunSteps<float>(1, c.lr, c.options), ElementsAreArray(c.after1));
  EXPECT_THAT(RunSteps<float>(5, c.lr, c.options), ElementsAreArray(c.after5));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SgdMatchesPyTorch,
    testing::Values(
        // run("SGD", 37, n, lr=0.1)
        Case{"plain",
             0.1,
             Opts(0, 0, 0, false),
             {0.531920075f, 0.561425626f, -0.103599779f, 1.02444732f,
              0.872410715f},
             {0.271445245f, 0.820578814f, -0.193285868f, 1.01871228f,
              0.781706631f}},
        // run("SGD", 37, n, lr=0.1, momentum=0.9): the first step equals
        // plain SGD because the buffer starts as the gradient.
        Case{"momentum",
             0.1,
             Opts(0.9, 0, 0, false),
             {0.531920075f, 0.561425626f, -0.103599779f, 1.02444732f,
              0.872410715f},
             {0.060238298f, 1.34934032f, -0.436717153f, 1.49550378f,
              0.688401997f}},
        // run("SGD", 37, n, lr=0.05, momentum=0.9, dampening=0.1,
        //     weight_decay=0.01)
        Case{"dampening_decay",
             0.05,
             Opts(0.9, 0.1, 0.01, false),
             {0.523334026f, 0.534830391f, -0.0537953041f, 0.986027122f,
              0.87482214f},
             {0.310828328f, 0.894279003f, -0.218793675f, 1.20394313f,
              0.786299884f}},
        // run("SGD", 37, n, lr=0.05, momentum=0.8, nesterov=True,
        //     weight_decay=0.001)
        Case{"nesterov",
             0.05,
             Opts(0.8, 0, 0.001, true),
             {0.530208051f, 0.556111693f, -0.0936389193f, 1.01677275f,
              0.872901797f},
             {0.223019674f, 0.959905088f, -0.249970675f, 1.15931821f,
              0.762267351f}},
        // run("SGD", 37, n, lr=0.02, momentum=0.5, maximize=True)
        Case{"maximize",
             0.02,
             Opts(0.5, 0, 0, false, true),
             {0.511931837f, 0.498207539f, 0.0159261674f, 0.933377087f,
              0.879251897f},
             {0.58395946f, 0.406003207f, 0.0502272099f, 0.904032648f,
              0.902487874f}}),
    [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(SgdTest, Float64MatchesPyTorch) {
  // run("SGD", 37, 5, dtype=torch.float64, lr=0.05, momentum=0.9,
  //     nesterov=True, weight_decay=0.01)
  EXPECT_THAT(RunSteps<double>(5, 0.05, Opts(0.9, 0, 0.01, true)),
              ElementsAre(-0.75836633400144271, 0.70368964220201069,
                          -0.48231073640834815, -0.32428104755992304,
                          0.98393799441399854));
}

TEST(SgdTest, UpdatesInPlaceAndFirstBufferIsTheGradient) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor flat, Tensor::Zeros({6}));
  // The parameter is a view into a larger buffer, as DDP arranges.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor p, flat.View(2, {2, 2}));
  p = p.Detach();
  TANDEM_NN_ASSERT_OK(p.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK(
      p.CopyFrom(*Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2})));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor g, Tensor::FromVector<float>({1, -1, 0.5, 0}, {2, 2}));
  TANDEM_NN_ASSERT_OK(p.set_grad(g));
  void* data = p.raw_data();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd,
                                 Sgd::Create({p}, 0.5, Opts(0.9, 0, 0, false)));
  EXPECT_FALSE(sgd.momentum_buffer(0).defined());
  TANDEM_NN_ASSERT_OK(sgd.Step());
  EXPECT_EQ(p.raw_data(), data);
  EXPECT_THAT(*flat.ToVector<float>(), ElementsAre(0, 0, 0.5, 2.5, 2.75, 4));
  EXPECT_THAT(*sgd.momentum_buffer(0).ToVector<float>(),
              ElementsAre(1, -1, 0.5, 0));
  // The gradient itself is untouched.
  EXPECT_THAT(*g.ToVector<float>(), ElementsAre(1, -1, 0.5, 0));
}

TEST(SgdTest, SkipsParametersWithoutGradient) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, Tensor::Ones({2}));
  TANDEM_NN_ASSERT_OK(a.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK(b.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK(a.set_grad(*Tensor::Full({3}, 2.0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Sgd sgd, Sgd::Create({a, b}, 0.25, Opts(0.5, 0, 0, false)));
  TANDEM_NN_ASSERT_OK(sgd.Step());
  EXPECT_THAT(*a.ToVector<float>(), ElementsAre(0.5, 0.5, 0.5));
  EXPECT_THAT(*b.ToVector<float>(), ElementsAre(1, 1));
  EXPECT_FALSE(sgd.momentum_buffer(1).defined());
}

TEST(SgdTest, ZeroGradZeroesInPlaceOrDrops) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  TANDEM_NN_ASSERT_OK(a.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor g, Tensor::Full({3}, 2.0));
  TANDEM_NN_ASSERT_OK(a.set_grad(g));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd, Sgd::Create({a}, 0.1));
  sgd.ZeroGrad();
  ASSERT_TRUE(a.has_grad());
  EXPECT_EQ(a.grad().raw_data(), g.raw_data());
  EXPECT_THAT(*g.ToVector<float>(), ElementsAre(0, 0, 0));
  sgd.ZeroGrad(/*set_to_none=*/true);
  EXPECT_FALSE(a.has_grad());
}

TEST(SgdTest, InvalidArgumentsAreRejected) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  TANDEM_NN_ASSERT_OK(a.set_requires_grad(true));
  EXPECT_THAT(Sgd::Create({a}, -0.1).status().message(),
              HasSubstr("learning rate"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(-1, 0, 0, false)).status().message(),
              HasSubstr("momentum"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(0, 0, 0, true)).status().message(),
              HasSubstr("Nesterov"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(0.9, 0.1, 0, true)).status().message(),
              HasSubstr("zero dampening"));
  EXPECT_THAT(Sgd::Create(std::vector<Tensor>{}, 0.1).status().message(),
              HasSubstr("empty parameter list"));
  EXPECT_THAT(Sgd::Create({a, a}, 0.1).status().message(),
              HasSubstr("parameter 1 is the same tensor as parameter 0"));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor ints, Tensor::Zeros({2}, DType::kI64));
  EXPECT_THAT(Sgd::Create({ints}, 0.1).status().message(),
              HasSubstr("only f32 and f64"));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor sum, Mul(a, 2.0));
  EXPECT_THAT(Sgd::Create({sum}, 0.1).status().message(),
              HasSubstr("not a leaf"));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd, Sgd::Create({a}, 0.1));
  EXPECT_FALSE(sgd.set_lr(-1).ok());
  TANDEM_NN_ASSERT_OK(sgd.set_lr(0.5));
  EXPECT_EQ(sgd.lr(), 0.5);
}

// PyTorch's rules in PyTorch's words, plus: every hyper-parameter finite.
TEST(SgdTest, HyperParametersFollowPyTorchsRulesAndMustBeFinite) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Ones({3}));
  TANDEM_NN_ASSERT_OK(a.set_requires_grad(true));
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const absl::Status negative = Sgd::Create({a}, -1).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(),
              HasSubstr("Sgd: Invalid learning rate: -1 (lr must be finite "
                        "and >= 0): pass a finite lr >= 0"));
  EXPECT_THAT(Sgd::Create({a}, inf).status().message(),
              HasSubstr("Invalid learning rate: inf"));
  EXPECT_THAT(Sgd::Create({a}, inf).status().message(),
              HasSubstr("inf and nan would turn every parameter into nan"));
  EXPECT_THAT(Sgd::Create({a}, nan).status().message(),
              HasSubstr("Invalid learning rate: nan"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(inf, 0, 0, false)).status().message(),
              HasSubstr("Invalid momentum value: inf"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(0, nan, 0, false)).status().message(),
              HasSubstr("Invalid dampening value: nan (dampening must be "
                        "finite)"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(0, 0, -2, false)).status().message(),
              HasSubstr("Invalid weight_decay value: -2"));
  EXPECT_THAT(Sgd::Create({a}, 0.1, Opts(0, 0, inf, false)).status().message(),
              HasSubstr("Invalid weight_decay value: inf"));
  // The boundaries PyTorch accepts stay accepted.
  EXPECT_TRUE(Sgd::Create({a}, 0, Opts(0, 1, 0, false)).ok());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd, Sgd::Create({a}, 0.1));
  EXPECT_THAT(sgd.set_lr(inf).message(),
              HasSubstr("Invalid learning rate: inf"));
  EXPECT_EQ(sgd.lr(), 0.1);
}

}  // namespace
}  // namespace tandem::optim
