// nn::BatchNorm2d against torch.nn.BatchNorm2d (PyTorch 1.13): running
// statistics with momentum None, eval mode, affine=False,
// track_running_stats=False, the state dict, repr, the one-value error, and
// GradCheck through the module. (The op's values with momentum 0.1 are
// checked in tensor/ops/batch_norm_test.cc.)
#include "tensor/nn/layers/batch_norm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
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
using norm_test::X;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Make(const std::vector<double>& v, DType dtype) {
  return norm_test::Make(v, {2, 3, 2, 2}, dtype);
}

struct Reference {
  // Running statistics after two batches with momentum None; eval on x with
  // them; a fresh module with affine=False in training, which equals one
  // with track_running_stats=False in eval (weight 1, bias 0).
  std::vector<double> rm, rv, eval_y, eval_dx, eval_dw, eval_db, y_batch,
      dx_batch;
};

// Printed by /usr/bin/python3 (torch 1.13):
//
//   import torch
//   def X(n, shift=0.0):
//       return [((i * 7) % 11 - 5) / 4 + 0.1 * i + shift for i in range(n)]
//   def G(n):
//       return [((i * 5) % 7 - 3) / 2 for i in range(n)]
//   def p(name, t):
//       print(name, '=', [float(v) for v in t.detach().reshape(-1)])
//   for dt in (torch.float64, torch.float32):
//       g = torch.tensor(G(24), dtype=dt).reshape(2, 3, 2, 2)
//       bn = torch.nn.BatchNorm2d(3, momentum=None).to(dt)
//       x = torch.tensor(X(24), dtype=dt).reshape(2, 3, 2, 2)
//       x2 = torch.tensor(X(24, 1.5), dtype=dt).reshape(2, 3, 2, 2) * 0.5
//       bn(x); bn(x2)
//       p('rm', bn.running_mean); p('rv', bn.running_var)
//       bn.eval()
//       xe = x.clone().requires_grad_()
//       y = bn(xe); (y * g).sum().backward()
//       p('eval_y', y); p('eval_dx', xe.grad); p('eval_dw', bn.weight.grad)
//       p('eval_db', bn.bias.grad)
//       for affine, track in ((False, True), (True, False)):
//           bn = torch.nn.BatchNorm2d(3, affine=affine,
//                                     track_running_stats=track).to(dt)
//           bn.eval() if not track else bn.train()
//           xa = x.clone().requires_grad_()
//           y = bn(xa); (y * g).sum().backward()
//           p('y_%d%d' % (affine, track), y)
//           p('dx_%d%d' % (affine, track), xa.grad)   # both cases equal

const Reference kF64Ref = {
    /*rm=*/{1.078125, 1.2140625000000003, 1.35},
    /*rv=*/{0.9820312500000001, 0.4986328125, 0.853125},
    /*eval_y=*/{-2.3493159608293057, -0.4824769691367568,  -1.39066891104124,
                0.47617008065130895, -0.7987896815656474,  -2.0733128299917216,
                0.546540308439653,   -0.7279828399864211,  -1.6781192469760802,
                0.32479727360827326, -0.6495945472165473,  -1.6239863680413678,
                0.6275354043020563,  -0.28065653760242715, 1.5861824540901222,
                0.6779905121856385,  -0.5155623152487421,  2.1042908231826325,
                0.8297676747565582,  -0.4447554736695156,  1.5157206101719432,
                0.5413287893471225,  -0.4330630314776981,  1.5698534891066556},
    /*eval_dx=*/
    {-1.5136532365074722,
     1.0091021576716481,
     0.0,
     -1.0091021576716481,
     2.12420524737679,
     0.7080684157922633,
     -0.7080684157922633,
     -2.12420524737679,
     1.0826575786942452,
     0.0,
     -1.0826575786942452,
     1.6239863680413678,
     0.5045510788358241,
     -0.5045510788358241,
     -1.5136532365074722,
     1.0091021576716481,
     0.0,
     -1.4161368315845266,
     2.12420524737679,
     0.7080684157922633,
     -0.5413287893471226,
     -1.6239863680413678,
     1.0826575786942452,
     0.0},
    /*eval_dw=*/{1.3181396934585898, -2.4981538794670795, -5.467420772405938},
    /*eval_db=*/{-2.0, 1.0, 0.5},
    /*y_01=*/{-1.8656054870417935, -0.28783627514359106, -1.0553996755265003,
              0.5223695363717021,  -0.5610269519046123,  -1.6381986995614677,
              0.5759876706220686,  -0.501184077034787,   -1.3725212868550576,
              0.3202549669328468,  -0.5032578051801877,  -1.3267705772932223,
              0.6502967697688539,  -0.11726663061405561, 1.4605025812841472,
              0.6929391809012375,  -0.32165545242531096, 1.8925309177582252,
              0.8153591701013697,  -0.26181257755548565, 1.3267705772932226,
              0.5032578051801879,  -0.32025496693284655, 1.372521286855058},
    /*dx_01=*/{-0.8922012747412315, 1.092884238860144,    0.31156657768059415,
               -0.6883166879848999, 1.4780420487866814,   -0.04067850806617236,
               -0.5759286054690749, -2.0946491623219283,  0.13601923998074594,
               0.11123314471856106, -1.236864985100343,   0.6175865544092207,
               0.5790338857419278,  -0.20228377543762202, -1.202167041103116,
               1.0014840769842037,  -0.24571907298444487, -0.7809691703873474,
               1.88931151364757,    0.37059095679471643,  0.1830508629228963,
               -1.165047266896008,  0.6894042726135559,   0.6646181773513712},
};
const Reference kF32Ref = {
    /*rm=*/{1.078125, 1.2140624523162842, 1.3499999046325684},
    /*rv=*/{0.9820312261581421, 0.4986328184604645, 0.8531249761581421},
    /*eval_y=*/{-2.349316120147705,  -0.48247694969177246, -1.3906689882278442,
                0.4761700928211212,  -0.7987896203994751,  -2.073312759399414,
                0.546540379524231,   -0.727982759475708,   -1.67811918258667,
                0.32479730248451233, -0.6495944857597351,  -1.6239863634109497,
                0.6275355219841003,  -0.28065651655197144, 1.586182713508606,
                0.6779905557632446,  -0.5155621767044067,  2.104290723800659,
                0.8297675848007202,  -0.4447554349899292,  1.5157206058502197,
                0.5413288474082947,  -0.43306297063827515, 1.5698535442352295},
    /*eval_dx=*/
    {-1.51365327835083,
     1.00910222530365,
     0.0,
     -1.00910222530365,
     2.1242053508758545,
     0.7080684304237366,
     -0.7080684304237366,
     -2.1242053508758545,
     1.0826575756072998,
     0.0,
     -1.0826575756072998,
     1.6239863634109497,
     0.504551112651825,
     -0.504551112651825,
     -1.51365327835083,
     1.00910222530365,
     0.0,
     -1.4161368608474731,
     2.1242053508758545,
     0.7080684304237366,
     -0.5413287878036499,
     -1.6239863634109497,
     1.0826575756072998,
     0.0},
    /*eval_dw=*/{1.318139672279358, -2.4981541633605957, -5.46742057800293},
    /*eval_db=*/{-2.0, 1.0, 0.5},
    /*y_01=*/{-1.8656054735183716, -0.2878362834453583,  -1.0553996562957764,
              0.5223695039749146,  -0.561026930809021,   -1.6381986141204834,
              0.575987696647644,   -0.5011840462684631,  -1.372521162033081,
              0.32025498151779175, -0.5032577514648438,  -1.3267704248428345,
              0.6502968072891235,  -0.11726663261651993, 1.4605026245117188,
              0.6929391622543335,  -0.32165539264678955, 1.892530918121338,
              0.8153591156005859,  -0.26181256771087646, 1.326770544052124,
              0.5032578706741333,  -0.3202548921108246,  1.3725212812423706},
    /*dx_01=*/{-0.8922013640403748, 1.0928841829299927,   0.311566561460495,
               -0.6883167028427124, 1.4780418872833252,   -0.04067853093147278,
               -0.5759285688400269, -2.094649076461792,   0.13601930439472198,
               0.11123313754796982, -1.2368648052215576,  0.617586612701416,
               0.5790339112281799,  -0.20228376984596252, -1.20216703414917,
               1.0014840364456177,  -0.2457190454006195,  -0.7809690833091736,
               1.88931143283844,    0.3705909252166748,   0.18305081129074097,
               -1.1650471687316895, 0.689404308795929,    0.6646180748939514},
};

void CheckAgainstTorch(DType dtype, const Reference& ref, double tol) {
  SCOPED_TRACE(DTypeName(dtype));
  const Tensor g = Make(G(24), dtype);
  BatchNorm2d::Options o;
  o.momentum = std::nullopt;
  o.dtype = dtype;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto bn, BatchNorm2d::Create(3, o));
  TANDEM_NN_ASSERT_OK(bn->Forward(Make(X(24), dtype)).status());
  EXPECT_EQ(bn->num_batches_tracked().Item().value(), 1);
  TANDEM_NN_ASSERT_OK(
      bn->Forward(Mul(Make(X(24, 1.5), dtype), 0.5).value()).status());
  EXPECT_EQ(bn->num_batches_tracked().Item().value(), 2);
  EXPECT_EQ(bn->num_batches_tracked().dtype(), DType::kI64);
  EXPECT_EQ(bn->num_batches_tracked().ndim(), 0);
  ExpectNear(bn->running_mean(), ref.rm, tol, "running_mean");
  ExpectNear(bn->running_var(), ref.rv, tol, "running_var");

  bn->Eval();
  Tensor xe = Make(X(24), dtype);
  ASSERT_TRUE(xe.set_requires_grad(true).ok());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, bn->Forward(xe));
  TANDEM_NN_ASSERT_OK(Sum(Mul(y, g).value()).value().Backward());
  ExpectNear(y, ref.eval_y, tol, "eval y");
  ExpectNear(xe.grad(), ref.eval_dx, tol, "eval dx");
  ExpectNear(bn->weight().grad(), ref.eval_dw, tol, "eval dw");
  ExpectNear(bn->bias().grad(), ref.eval_db, tol, "eval db");
  // Eval changes nothing.
  EXPECT_EQ(bn->num_batches_tracked().Item().value(), 2);
  ExpectNear(bn->running_mean(), ref.rm, tol, "running_mean after eval");

  for (bool affine : {false, true}) {
    SCOPED_TRACE(affine ? "no tracking, eval" : "no affine, train");
    BatchNorm2d::Options a;
    a.dtype = dtype;
    a.affine = affine;
    a.track_running_stats = !affine;  // (False, True) and (True, False)
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto m, BatchNorm2d::Create(3, a));
    if (!a.track_running_stats) m->Eval();
    Tensor x = Make(X(24), dtype);
    ASSERT_TRUE(x.set_requires_grad(true).ok());
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor ya, m->Forward(x));
    TANDEM_NN_ASSERT_OK(Sum(Mul(ya, g).value()).value().Backward());
    ExpectNear(ya, ref.y_batch, tol, "y");
    ExpectNear(x.grad(), ref.dx_batch, tol, "dx");
    EXPECT_EQ(m->weight().defined(), affine);
    EXPECT_EQ(m->running_mean().defined(), !affine);
  }
}

TEST(BatchNorm2dTest, MatchesPyTorch) {
  CheckAgainstTorch(DType::kF64, kF64Ref, 1e-13);
  // f32: see tensor/ops/batch_norm_test.cc.
  CheckAgainstTorch(DType::kF32, kF32Ref, 2e-7);
}

TEST(BatchNorm2dTest, StateDictNamesAndOrderArePyTorchs) {
  // list(torch.nn.BatchNorm2d(4).state_dict().keys()), and with
  // affine=False, and with track_running_stats=False.
  auto names = [](const BatchNorm2d::Options& o) {
    std::vector<std::string> out;
    for (const NamedTensor& e :
         BatchNorm2d::Create(4, o).value()->StateDict()) {
      out.push_back(e.name);
    }
    return out;
  };
  EXPECT_THAT(names({}), ElementsAre("weight", "bias", "running_mean",
                                     "running_var", "num_batches_tracked"));
  EXPECT_THAT(
      names({.affine = false}),
      ElementsAre("running_mean", "running_var", "num_batches_tracked"));
  EXPECT_THAT(names({.track_running_stats = false}),
              ElementsAre("weight", "bias"));
  auto bn = BatchNorm2d::Create(4).value();
  EXPECT_EQ(bn->NamedParameters().size(), 2u);
  EXPECT_EQ(Doubles(bn->weight()), std::vector<double>(4, 1.0));
  EXPECT_EQ(Doubles(bn->bias()), std::vector<double>(4, 0.0));
  EXPECT_EQ(Doubles(bn->running_mean()), std::vector<double>(4, 0.0));
  EXPECT_EQ(Doubles(bn->running_var()), std::vector<double>(4, 1.0));
  EXPECT_EQ(bn->num_batches_tracked().Item().value(), 0);
  EXPECT_EQ(bn->weight().dtype(), DType::kF32);
  // A state dict round trip carries the buffers.
  auto other = BatchNorm2d::Create(4).value();
  TANDEM_NN_ASSERT_OK(FillInPlace(bn->running_mean(), 0.5));
  TANDEM_NN_ASSERT_OK(FillInPlace(bn->num_batches_tracked(), 7));
  TANDEM_NN_ASSERT_OK(other->LoadStateDict(bn->StateDict()));
  EXPECT_EQ(Doubles(other->running_mean()), std::vector<double>(4, 0.5));
  EXPECT_EQ(other->num_batches_tracked().Item().value(), 7);
}

TEST(BatchNorm2dTest, ReprIsPyTorchs) {
  // print(torch.nn.BatchNorm2d(4),
  //       torch.nn.BatchNorm2d(4, eps=1e-3, momentum=None, affine=False))
  EXPECT_EQ(BatchNorm2d::Create(4).value()->ToString(),
            "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, "
            "track_running_stats=True)");
  BatchNorm2d::Options o;
  o.eps = 1e-3;
  o.momentum = std::nullopt;
  o.affine = false;
  EXPECT_EQ(BatchNorm2d::Create(4, o).value()->ToString(),
            "BatchNorm2d(4, eps=0.001, momentum=None, affine=False, "
            "track_running_stats=True)");
}

TEST(BatchNorm2dTest, OneValuePerChannelIsAnErrorAndChangesNothing) {
  auto bn = BatchNorm2d::Create(3).value();
  absl::StatusOr<Tensor> y =
      bn->Forward(Tensor::Zeros({1, 3, 1, 1}, DType::kF32).value());
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  // PyTorch: "Expected more than 1 value per channel when training, got
  // input size torch.Size([1, 3, 1, 1])".
  EXPECT_THAT(y.status().message(),
              HasSubstr("Expected more than 1 value per channel when "
                        "training, got input size [1, 3, 1, 1]"));
  EXPECT_THAT(y.status().message(), HasSubstr("nn::BatchNorm2d(3, eps="));
  EXPECT_EQ(bn->num_batches_tracked().Item().value(), 0);
  // Eval mode takes it.
  bn->Eval();
  EXPECT_TRUE(
      bn->Forward(Tensor::Zeros({1, 3, 1, 1}, DType::kF32).value()).ok());
}

TEST(BatchNorm2dTest, BadArguments) {
  auto bn = BatchNorm2d::Create(3).value();
  EXPECT_THAT(
      bn->Forward(Tensor::Zeros({2, 4, 2, 2}).value()).status().message(),
      HasSubstr("expected input [N, 3, H, W], got f32[2, 4, 2, 2]"));
  EXPECT_THAT(bn->Forward(Tensor::Zeros({2, 3}).value()).status().message(),
              HasSubstr("got f32[2, 3]"));
  EXPECT_THAT(bn->Forward(Tensor::Zeros({2, 3, 2, 2}, DType::kF64).value())
                  .status()
                  .message(),
              HasSubstr("expected `weight` f64[3]"));
  EXPECT_FALSE(BatchNorm2d::Create(0).ok());
  EXPECT_FALSE(BatchNorm2d::Create(3, {.eps = -1}).ok());
  EXPECT_FALSE(BatchNorm2d::Create(3, {.momentum = NAN}).ok());
  EXPECT_FALSE(BatchNorm2d::Create(3, {.dtype = DType::kI64}).ok());
}

TEST(BatchNorm2dTest, GradCheckThroughTheModule) {
  std::mt19937 rng(3);
  auto bn = BatchNorm2d::Create(3, {.dtype = DType::kF64}).value();
  TANDEM_NN_ASSERT_OK(
      bn->weight().CopyFrom(RandomTensor({3}, rng, 0.5, 2, false)));
  TANDEM_NN_ASSERT_OK(
      bn->bias().CopyFrom(RandomTensor({3}, rng, -1, 1, false)));
  // momentum 0.1 moves the running statistics on every evaluation; they
  // do not enter the training output, so the check holds.
  absl::Status s = GradCheck(
      [&](const std::vector<Tensor>& in) -> absl::StatusOr<Tensor> {
        return bn->Forward(in[0]);
      },
      {RandomTensor({3, 3, 2, 2}, rng, -2, 2), bn->weight(), bn->bias()});
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace tandem::nn
