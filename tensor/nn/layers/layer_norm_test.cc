// nn::LayerNorm against torch.nn.LayerNorm (PyTorch 1.13): values and
// gradients without affine over two dims, parameters and state dict, repr,
// GradCheck through the module, errors. (The op's values with affine are
// checked in tensor/ops/layer_norm_test.cc.)
#include "tensor/nn/layers/layer_norm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"
#include "tensor/testing/norm_test_util.h"

namespace tandem::nn {
namespace {

using norm_test::Doubles;
using norm_test::ExpectNear;
using norm_test::G;
using norm_test::Make;
using norm_test::X;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Reference {
  std::vector<double> y, dx;
};

// Printed by /usr/bin/python3 (torch 1.13), with X, G and p as in
// tensor/ops/layer_norm_test.cc's script:
//
//   for dt in (torch.float64, torch.float32):
//       x = torch.tensor(X(24), dtype=dt).reshape(2, 3, 4).requires_grad_()
//       g = torch.tensor(G(24), dtype=dt).reshape(2, 3, 4)
//       ln = torch.nn.LayerNorm((3, 4), eps=1e-3,
//                               elementwise_affine=False).to(dt)
//       y = ln(x); (y * g).sum().backward()
//       p('y', y); p('dx', x.grad)

const Reference kF64Ref = {
    /*y2=*/{-1.9664681319192638,  0.1787698301744786,  -0.8648594486819366,
            1.280378513411806,    0.23674923455539063, -0.8068800443010247,
            1.3383579177927178,   0.29472863893630263, -0.7489006399201127,
            1.3963373221736297,   0.3527080433172145,  -0.6909212355392006,
            -0.12092001368167057, -1.3081346934653457, 1.1322510372010979,
            -0.05496364258257774, -1.2421783223662526, 1.1982074083001906,
            0.010992728516515374, -1.1762219512671597, 1.2641637793992835,
            0.07694909961560849,  -1.1102655801680665, 1.3301201504983768},
    /*dx2=*/{-2.014819696302152,   1.1846278662432204,  -0.12113838848301726,
             -0.9802491326014817,  1.7725429193361175,  0.46677666460988,
             -0.39233407950858445, -1.6981003342348222, 1.0546917177027773,
             0.1955809735843128,   -1.110185281141925,  1.6426067707956744,
             0.6508921625756501,   -1.2930171346579098, -1.3278707019557239,
             1.3451659777472302,   -0.5987433194863292, -0.6335968867841434,
             2.0394397929188113,   0.0955304956852514,  0.06067692838743688,
             -1.8832323688461228,  0.789804310856832,   0.7549507435590177},
};
const Reference kF32Ref = {
    /*y2=*/{-1.966468095779419,    0.17876985669136047, -0.8648594617843628,
            1.2803784608840942,    0.23674920201301575, -0.8068800568580627,
            1.338357925415039,     0.2947286367416382,  -0.7489006519317627,
            1.3963372707366943,    0.35270804166793823, -0.6909212470054626,
            -0.12091995030641556,  -1.3081345558166504, 1.1322510242462158,
            -0.054963648319244385, -1.242178201675415,  1.1982073783874512,
            0.010992654599249363,  -1.1762218475341797, 1.2641637325286865,
            0.0769491121172905,    -1.1102654933929443, 1.3301199674606323},
    /*dx2=*/{-2.014819622039795,   1.184627890586853,   -0.12113840878009796,
             -0.9802491664886475,  1.772542953491211,   0.46677663922309875,
             -0.39233407378196716, -1.6981003284454346, 1.0546916723251343,
             0.19558098912239075,  -1.1101852655410767, 1.6426067352294922,
             0.6508922576904297,   -1.2930169105529785, -1.327870488166809,
             1.3451660871505737,   -0.5987430810928345, -0.6335967779159546,
             2.0394396781921387,   0.09553062915802002, 0.0606769323348999,
             -1.8832321166992188,  0.7898044586181641,  0.7549506425857544},
};

void CheckAgainstTorch(DType dtype, const Reference& ref, double tol) {
  SCOPED_TRACE(DTypeName(dtype));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      auto ln,
      LayerNorm::Create(
          {3, 4}, {.eps = 1e-3, .elementwise_affine = false, .dtype = dtype}));
  EXPECT_TRUE(ln->NamedParameters().empty());
  Tensor x = Make(X(24), {2, 3, 4}, dtype);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, ln->Forward(x));
  TANDEM_NN_ASSERT_OK(
      Sum(Mul(y, Make(G(24), {2, 3, 4}, dtype)).value()).value().Backward());
  ExpectNear(y, ref.y, tol, "y");
  ExpectNear(x.grad(), ref.dx, tol, "dx");
}

TEST(LayerNormModuleTest, MatchesPyTorch) {
  CheckAgainstTorch(DType::kF64, kF64Ref, 1e-13);
  CheckAgainstTorch(DType::kF32, kF32Ref, 4e-7);  // as the op's test
}

TEST(LayerNormModuleTest, ParametersAndRepr) {
  // list(torch.nn.LayerNorm(4).state_dict().keys());
  // print(torch.nn.LayerNorm(4),
  //   torch.nn.LayerNorm((3, 4), eps=1e-3, elementwise_affine=False))
  auto ln = LayerNorm::Create(4).value();
  std::vector<std::string> names;
  for (const NamedTensor& e : ln->StateDict()) names.push_back(e.name);
  EXPECT_THAT(names, ElementsAre("weight", "bias"));
  EXPECT_EQ(Doubles(ln->weight()), std::vector<double>(4, 1.0));
  EXPECT_EQ(Doubles(ln->bias()), std::vector<double>(4, 0.0));
  EXPECT_TRUE(ln->NamedBuffers().empty());
  EXPECT_EQ(ln->ToString(),
            "LayerNorm((4,), eps=1e-05, elementwise_affine=True)");
  EXPECT_EQ(
      LayerNorm::Create({3, 4}, {.eps = 1e-3, .elementwise_affine = false})
          .value()
          ->ToString(),
      "LayerNorm((3, 4), eps=0.001, elementwise_affine=False)");
  EXPECT_EQ(LayerNorm::Create({2, 5}).value()->weight().shape(), (Shape{2, 5}));
}

TEST(LayerNormModuleTest, GradCheckThroughTheModule) {
  std::mt19937 rng(4);
  auto ln = LayerNorm::Create(5, {.dtype = DType::kF64}).value();
  TANDEM_NN_ASSERT_OK(
      ln->weight().CopyFrom(RandomTensor({5}, rng, 0.5, 2, false)));
  TANDEM_NN_ASSERT_OK(
      ln->bias().CopyFrom(RandomTensor({5}, rng, -1, 1, false)));
  absl::Status s = GradCheck(
      [&](const std::vector<Tensor>& in) -> absl::StatusOr<Tensor> {
        return ln->Forward(in[0]);
      },
      {RandomTensor({2, 3, 5}, rng, -2, 2), ln->weight(), ln->bias()});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LayerNormModuleTest, BadArguments) {
  auto ln = LayerNorm::Create(4).value();
  // PyTorch: "Given normalized_shape=[4], expected input with shape [*, 4],
  // but got input of size[2, 3]".
  EXPECT_THAT(ln->Forward(Tensor::Zeros({2, 3}).value()).status().message(),
              HasSubstr("nn::LayerNorm((4,), eps=1e-05, elementwise_affine="
                        "True): LayerNorm: normalized_shape [4] must be"));
  EXPECT_FALSE(LayerNorm::Create(0).ok());
  EXPECT_FALSE(LayerNorm::Create(Shape{}).ok());
  EXPECT_FALSE(LayerNorm::Create(4, {.eps = NAN}).ok());
  EXPECT_FALSE(LayerNorm::Create(4, {.dtype = DType::kI32}).ok());
}

}  // namespace
}  // namespace tandem::nn
