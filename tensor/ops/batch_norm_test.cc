// BatchNorm (tensor/ops/batch_norm.cc): values, gradients and running
// statistics against PyTorch 1.13's torch.nn.functional.batch_norm; the
// pieces of tensor/ops/batch_norm.h composed as SyncBatchNorm composes
// them; GradCheck in f64; the argument checks.
#include "tensor/ops/batch_norm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tensor/dispatch/op_table.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"
#include "tensor/testing/norm_test_util.h"

namespace tandem {
namespace {

using norm_test::Doubles;
using norm_test::ExpectNear;
using norm_test::G;
using norm_test::Make;
using norm_test::X;
using ::testing::HasSubstr;

struct Reference {
  std::vector<double> y, dx, dw, db, rm, rv, rm2, rv2, eval_y, eval_dx, eval_dw,
      eval_db;
};

// Printed by /usr/bin/python3 (torch 1.13):
//
//   import torch
//   import torch.nn.functional as F
//   def X(n, shift=0.0):
//       return [((i * 7) % 11 - 5) / 4 + 0.1 * i + shift for i in range(n)]
//   def G(n):
//       return [((i * 5) % 7 - 3) / 2 for i in range(n)]
//   def p(name, t):
//       print(name, '=', [float(v) for v in t.detach().reshape(-1)])
//   for dt in (torch.float64, torch.float32):
//       w = torch.tensor([0.5, -1.25, 2.0], dtype=dt, requires_grad=True)
//       b = torch.tensor([0.1, 0.2, -0.3], dtype=dt, requires_grad=True)
//       rm = torch.zeros(3, dtype=dt); rv = torch.ones(3, dtype=dt)
//       x = torch.tensor(X(24), dtype=dt).reshape(2, 3, 2, 2).requires_grad_()
//       g = torch.tensor(G(24), dtype=dt).reshape(2, 3, 2, 2)
//       y = F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5)
//       (y * g).sum().backward()
//       p('y', y); p('dx', x.grad); p('dw', w.grad); p('db', b.grad)
//       p('rm', rm); p('rv', rv)
//       x2 = torch.tensor(X(24, 1.5), dtype=dt).reshape(4, 3, 2) * 0.5
//       F.batch_norm(x2, rm, rv, None, None, True, 0.3, 1e-3)
//       p('rm2', rm); p('rv2', rv)
//       w.grad = None; b.grad = None
//       xe = torch.tensor(X(24), dtype=dt).reshape(2, 3, 2, 2).requires_grad_()
//       ye = F.batch_norm(xe, rm, rv, w, b, False, 0.1, 1e-5)
//       (ye * g).sum().backward()
//       p('eval_y', ye); p('eval_dx', xe.grad); p('eval_dw', w.grad)
//       p('eval_db', b.grad)

const Reference kF64Ref = {
    /*y=*/{-0.8328027435208968, -0.04391813757179556, -0.4276998377632502,
           0.36118476818585105, 0.9012836898807653,   2.2477483744518345,
           -0.5199845882775855, 0.8264800962934837,   -3.0450425737101154,
           0.3405099338656933,  -1.3065156103603757,  -2.953541154586445,
           0.4251483848844269,  0.041366684692972173, 0.8302512906420736,
           0.44646959045061874, 0.6020693155316388,   -2.1656636471977815,
           -0.819198962626712,  0.5272657219443571,   2.353541154586445,
           0.7065156103603757,  -0.9405099338656934,  2.445042573710116},
    /*dx=*/{-0.4461006373706157,  0.546442119430072,    0.15578328884029707,
            -0.34415834399244993, -1.8475525609833519,  0.05084813508271545,
            0.7199107568363436,   2.6183114529024105,   0.2720384799614919,
            0.22246628943712213,  -2.473729970200686,   1.2351731088184414,
            0.2895169428709639,   -0.10114188771881101, -0.601083520551558,
            0.5007420384921019,   0.3071488412305561,   0.9762114629841843,
            -2.3616393920594625,  -0.4632386959933955,  0.3661017258457926,
            -2.330094533792016,   1.3788085452271117,   1.3292363547027424},
    /*dw=*/{0.8741694282138684, -1.99725594878042, -4.597946310964444},
    /*db=*/{-2.0, 1.0, 0.5},
    /*rm=*/{0.09375000000000001, 0.11187500000000002, 0.13},
    /*rv=*/{1.057125, 0.97978125, 1.0365},
    /*rm2=*/{0.4190625, 0.5226875, 0.47162499999999996},
    /*rv2=*/{0.8116359375, 0.7845656249999999, 0.8242687499999999},
    /*eval_y=*/{-0.8263162747256064, 0.20041885846585397,   -0.2990739090326943,
                0.7276612241587661,  0.020334928892411754,  1.2904267423186613,
                -1.320317540835296,  -0.050225727409046614, -1.7795164469397124,
                2.2958312944910984,  0.31322969055178496,   -1.6693719133875282,
                0.8109100187418575,  0.3114172512433092,    1.3381523844347698,
                0.8386596169362213,  -0.26190769631342153,  -2.872651979467379,
                -1.6025601660411293, -0.3324683526148799,   4.719011032639148,
                2.736409428699835,   0.7538078247605217,    4.829155566191333},
    /*eval_dx=*/
    {-0.8324879458309138,
     0.5549919638872759,
     0.0,
     -0.5549919638872759,
     -2.116819689043749,
     -0.705606563014583,
     0.705606563014583,
     2.116819689043749,
     2.2028906710436815,
     0.0,
     -2.2028906710436815,
     3.3043360065655225,
     0.27749598194363795,
     -0.27749598194363795,
     -0.8324879458309138,
     0.5549919638872759,
     -0.0,
     1.411213126029166,
     -2.116819689043749,
     -0.705606563014583,
     -1.1014453355218408,
     -3.3043360065655225,
     2.2028906710436815,
     0.0},
    /*eval_dw=*/
    {-0.013181059142323138, -1.2110325441019285, -5.078557921090797},
    /*eval_db=*/{-2.0, 1.0, 0.5},
};
const Reference kF32Ref = {
    /*y=*/{-0.8328027725219727, -0.04391814023256302, -0.42769986391067505,
           0.3611847460269928,  0.9012836813926697,   2.247748374938965,
           -0.5199846625328064, 0.8264800310134888,   -3.0450422763824463,
           0.3405100405216217,  -1.3065154552459717,  -2.953540802001953,
           0.4251483976840973,  0.04136667773127556,  0.8302513360977173,
           0.44646957516670227, 0.6020691990852356,   -2.165663719177246,
           -0.8191989064216614, 0.527265727519989,    2.353541135787964,
           0.7065157890319824,  -0.9405097365379333,  2.445042610168457},
    /*dx=*/{-0.4461006820201874, 0.5464420914649963,   0.1557832807302475,
            -0.3441583514213562, -1.8475522994995117,  0.05084816366434097,
            0.719910740852356,   2.6183114051818848,   0.27203860878944397,
            0.22246627509593964, -2.4737296104431152,  1.235173225402832,
            0.28951695561408997, -0.10114188492298126, -0.601083517074585,
            0.5007420182228088,  0.307148814201355,    0.9762113690376282,
            -2.3616392612457275, -0.4632386565208435,  0.36610162258148193,
            -2.330094337463379,  1.378808617591858,    1.3292361497879028},
    /*dw=*/{0.8741692900657654, -1.9972561597824097, -4.5979461669921875},
    /*db=*/{-2.0, 1.0, 0.5},
    /*rm=*/{0.09375, 0.11187499761581421, 0.12999999523162842},
    /*rv=*/{1.0571249723434448, 0.9797812104225159, 1.0364999771118164},
    /*rm2=*/{0.4190624952316284, 0.522687554359436, 0.4716250002384186},
    /*rv2=*/{0.8116359114646912, 0.7845656275749207, 0.8242687582969666},
    /*eval_y=*/{-0.826316237449646,  0.2004188746213913,   -0.2990739047527313,
                0.7276611924171448,  0.020335040986537933, 1.2904268503189087,
                -1.3203175067901611, -0.0502256341278553,  -1.7795164585113525,
                2.2958312034606934,  0.31322962045669556,  -1.6693719625473022,
                0.8109100461006165,  0.31141725182533264,  1.3381524085998535,
                0.8386596441268921,  -0.2619076669216156,  -2.872652053833008,
                -1.602560043334961,  -0.3324682414531708,  4.719010829925537,
                2.7364094257354736,  0.7538077235221863,   4.829155445098877},
    /*eval_dx=*/
    {-0.832487940788269,
     0.5549919605255127,
     0.0,
     -0.5549919605255127,
     -2.1168196201324463,
     -0.7056065797805786,
     0.7056065797805786,
     2.1168196201324463,
     2.202890634536743,
     0.0,
     -2.202890634536743,
     3.3043360710144043,
     0.27749598026275635,
     -0.27749598026275635,
     -0.832487940788269,
     0.5549919605255127,
     -0.0,
     1.4112131595611572,
     -2.1168196201324463,
     -0.7056065797805786,
     -1.1014453172683716,
     -3.3043360710144043,
     2.202890634536743,
     0.0},
    /*eval_dw=*/{-0.013180963695049286, -1.211032509803772, -5.078557968139648},
    /*eval_db=*/{-2.0, 1.0, 0.5},
};

void CheckAgainstTorch(DType dtype, const Reference& ref, double tol) {
  SCOPED_TRACE(DTypeName(dtype));
  Tensor w = Make({0.5, -1.25, 2.0}, {3}, dtype);
  Tensor b = Make({0.1, 0.2, -0.3}, {3}, dtype);
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  ASSERT_TRUE(b.set_requires_grad(true).ok());
  Tensor rm = Tensor::Zeros({3}, dtype).value();
  Tensor rv = Tensor::Ones({3}, dtype).value();
  Tensor x = Make(X(24), {2, 3, 2, 2}, dtype);
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  Tensor g = Make(G(24), {2, 3, 2, 2}, dtype);

  absl::StatusOr<Tensor> y = BatchNorm(x, w, b, rm, rv, true, 0.1, 1e-5);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), dtype);
  EXPECT_EQ(y->shape(), x.shape());
  ASSERT_TRUE(Sum(Mul(*y, g).value()).value().Backward().ok());
  ExpectNear(*y, ref.y, tol, "y");
  ExpectNear(x.grad(), ref.dx, tol, "dx");
  ExpectNear(w.grad(), ref.dw, tol, "dw");
  ExpectNear(b.grad(), ref.db, tol, "db");
  ExpectNear(rm, ref.rm, tol, "running_mean");
  ExpectNear(rv, ref.rv, tol, "running_var");
  EXPECT_FALSE(rm.requires_grad());

  // [N, C, L], no affine, other momentum and eps: only the statistics.
  Tensor x2 = Mul(Make(X(24, 1.5), {4, 3, 2}, dtype), 0.5).value();
  ASSERT_TRUE(BatchNorm(x2, Tensor(), Tensor(), rm, rv, true, 0.3, 1e-3).ok());
  ExpectNear(rm, ref.rm2, tol, "running_mean, second batch");
  ExpectNear(rv, ref.rv2, tol, "running_var, second batch");

  // Eval: the running statistics, left unchanged.
  const std::vector<double> rm_before = Doubles(rm), rv_before = Doubles(rv);
  w.ClearGrad();
  b.ClearGrad();
  Tensor xe = Make(X(24), {2, 3, 2, 2}, dtype);
  ASSERT_TRUE(xe.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> ye = BatchNorm(xe, w, b, rm, rv, false, 0.1, 1e-5);
  ASSERT_TRUE(ye.ok()) << ye.status();
  ASSERT_TRUE(Sum(Mul(*ye, g).value()).value().Backward().ok());
  ExpectNear(*ye, ref.eval_y, tol, "eval y");
  ExpectNear(xe.grad(), ref.eval_dx, tol, "eval dx");
  ExpectNear(w.grad(), ref.eval_dw, tol, "eval dw");
  ExpectNear(b.grad(), ref.eval_db, tol, "eval db");
  EXPECT_EQ(Doubles(rm), rm_before);
  EXPECT_EQ(Doubles(rv), rv_before);
}

TEST(BatchNormTest, MatchesPyTorch) {
  CheckAgainstTorch(DType::kF64, kF64Ref, 1e-13);
  // f32: within 2e-7 * (1 + |expected|), about two ulps: sums in double as
  // PyTorch's, but its vectorised loops and its float running-statistics
  // update round differently in the last bit.
  CheckAgainstTorch(DType::kF32, kF32Ref, 2e-7);
}

TEST(BatchNormTest, GradCheck) {
  std::mt19937 rng(5);
  for (bool training : {true, false}) {
    for (bool affine : {true, false}) {
      SCOPED_TRACE(std::string(training ? "train" : "eval") +
                   (affine ? " affine" : ""));
      Tensor rm = RandomTensor({3}, rng, -0.5, 0.5, false);
      Tensor rv = RandomTensor({3}, rng, 0.5, 2, false);
      std::vector<Tensor> in = {RandomTensor({4, 3, 2, 3}, rng, -2, 2)};
      if (affine) {
        in.push_back(RandomTensor({3}, rng, 0.5, 2));
        in.push_back(RandomTensor({3}, rng));
      }
      absl::Status s = GradCheck(
          [&](const std::vector<Tensor>& t) {
            // The running statistics stay as they are across the
            // evaluations (momentum 0).
            return BatchNorm(t[0], affine ? t[1] : Tensor(),
                             affine ? t[2] : Tensor(), rm, rv, training, 0.0,
                             1e-5);
          },
          in);
      EXPECT_TRUE(s.ok()) << s;
    }
  }
}

TEST(BatchNormTest, TwoDimensionalInput) {
  // [N, C] (BatchNorm1d): the same as [N, C, 1, 1].
  std::mt19937 rng(6);
  Tensor x = RandomTensor({5, 3}, rng, -2, 2, false);
  Tensor y =
      BatchNorm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5)
          .value();
  Tensor y4 = BatchNorm(x.Reshape({5, 3, 1, 1}).value(), Tensor(), Tensor(),
                        Tensor(), Tensor(), true, 0.1, 1e-5)
                  .value();
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  EXPECT_EQ(Doubles(y), Doubles(y4));
  // Each channel has mean 0 and biased variance 1 / (1 + eps / var).
  std::vector<double> v = Doubles(y);
  for (int c = 0; c < 3; ++c) {
    double s = 0, s2 = 0;
    for (int n = 0; n < 5; ++n) {
      s += v[n * 3 + c];
      s2 += v[n * 3 + c] * v[n * 3 + c];
    }
    EXPECT_NEAR(s / 5, 0, 1e-15);
    EXPECT_NEAR(s2 / 5, 1, 1e-4);
  }
}

// SyncBatchNorm's composition: statistics of two halves of a batch,
// gathered, equal the statistics of the whole batch; the backward pieces
// with the summed sums give the whole batch's gradient.
TEST(BatchNormTest, PiecesComposeOverGroups) {
  std::mt19937 rng(7);
  Tensor whole = RandomTensor({5, 3, 2, 2}, rng, -2, 3, false);
  Tensor dy = RandomTensor({5, 3, 2, 2}, rng, -1, 1, false);
  Tensor w = RandomTensor({3}, rng, 0.5, 2, false);
  std::vector<double> xv = Doubles(whole), gv = Doubles(dy);
  // Rows 0..1 and 2..4.
  auto part = [](const std::vector<double>& v, int from, int to) {
    return Tensor::FromVector(
               std::vector<double>(v.begin() + from * 12, v.begin() + to * 12),
               {to - from, 3, 2, 2})
        .value();
  };
  Tensor a = part(xv, 0, 2), b = part(xv, 2, 5);
  BatchNormStats sa = BatchNormStatsOf(a).value();
  BatchNormStats sb = BatchNormStatsOf(b).value();
  std::vector<double> means = Doubles(sa.mean), vars = Doubles(sa.var);
  for (double m : Doubles(sb.mean)) means.push_back(m);
  for (double v : Doubles(sb.var)) vars.push_back(v);
  Tensor rm = Tensor::Zeros({3}, DType::kF64).value();
  Tensor rv = Tensor::Ones({3}, DType::kF64).value();
  BatchNormSaved s = BatchNormGatherStats(
                         Tensor::FromVector(means, {2, 3}).value(),
                         Tensor::FromVector(vars, {2, 3}).value(),
                         Tensor::FromVector(std::vector<double>{8, 12}).value(),
                         rm, rv, 0.1, 1e-5)
                         .value();
  // The whole batch through BatchNorm.
  Tensor rm_whole = Tensor::Zeros({3}, DType::kF64).value();
  Tensor rv_whole = Tensor::Ones({3}, DType::kF64).value();
  Tensor xw = whole.Clone().value();
  ASSERT_TRUE(xw.set_requires_grad(true).ok());
  Tensor y_whole =
      BatchNorm(xw, w, Tensor(), rm_whole, rv_whole, true, 0.1, 1e-5).value();
  ASSERT_TRUE(y_whole.Backward(dy).ok());
  BatchNormStats st = BatchNormStatsOf(whole).value();
  ExpectNear(s.mean, Doubles(st.mean), 1e-14, "mean");
  ExpectNear(rm, Doubles(rm_whole), 1e-14, "running_mean");
  ExpectNear(rv, Doubles(rv_whole), 1e-14, "running_var");
  // The halves normalised with the gathered statistics.
  std::vector<double> y;
  for (const Tensor& h : {a, b}) {
    for (double v :
         Doubles(BatchNormElemt(h, w, Tensor(), s.mean, s.invstd).value())) {
      y.push_back(v);
    }
  }
  ExpectNear(y_whole, y, 1e-14, "y");
  // Backward: each half's sums, added (the all-reduce), then each half's dx.
  Tensor ga = part(gv, 0, 2), gb = part(gv, 2, 5);
  BatchNormGradSums ra = BatchNormBackwardReduce(ga, a, s.mean).value();
  BatchNormGradSums rb = BatchNormBackwardReduce(gb, b, s.mean).value();
  Tensor sum_dy = Add(ra.sum_dy, rb.sum_dy).value();
  Tensor sum_dy_xmu = Add(ra.sum_dy_xmu, rb.sum_dy_xmu).value();
  std::vector<double> dx;
  for (auto [g, h] : {std::pair{ga, a}, std::pair{gb, b}}) {
    for (double v : Doubles(BatchNormBackwardElemt(g, h, s.mean, s.invstd, w,
                                                   sum_dy, sum_dy_xmu, 20)
                                .value())) {
      dx.push_back(v);
    }
  }
  ExpectNear(xw.grad(), dx, 1e-13, "dx");
}

TEST(BatchNormTest, EmptyBatchLeavesStatistics) {
  Tensor x = Tensor::Zeros({0, 3, 2, 2}, DType::kF32).value();
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  Tensor w = Tensor::Ones({3}, DType::kF32).value();
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  Tensor rm = Tensor::Zeros({3}, DType::kF32).value();
  Tensor rv = Tensor::Ones({3}, DType::kF32).value();
  Tensor y = BatchNorm(x, w, Tensor(), rm, rv, true, 0.1, 1e-5).value();
  EXPECT_EQ(y.shape(), x.shape());
  ASSERT_TRUE(Sum(y).value().Backward().ok());
  EXPECT_EQ(Doubles(rm), std::vector<double>(3, 0.0));
  EXPECT_EQ(Doubles(rv), std::vector<double>(3, 1.0));
  EXPECT_EQ(Doubles(w.grad()), std::vector<double>(3, 0.0));
}

TEST(BatchNormTest, LowPrecisionInputComputesInF32) {
  std::mt19937 rng(8);
  Tensor x =
      RandomTensor({4, 3, 2, 2}, rng, -2, 2, false).To(DType::kBF16).value();
  Tensor w = Tensor::Ones({3}, DType::kF32).value();
  Tensor rm = Tensor::Zeros({3}, DType::kF32).value();
  Tensor rv = Tensor::Ones({3}, DType::kF32).value();
  Tensor y = BatchNorm(x, w, Tensor(), rm, rv, true, 0.1, 1e-5).value();
  EXPECT_EQ(y.dtype(), DType::kBF16);
  Tensor rm32 = Tensor::Zeros({3}, DType::kF32).value();
  Tensor rv32 = Tensor::Ones({3}, DType::kF32).value();
  Tensor y32 = BatchNorm(x.To(DType::kF32).value(), w, Tensor(), rm32, rv32,
                         true, 0.1, 1e-5)
                   .value();
  EXPECT_EQ(Doubles(y), Doubles(y32.To(DType::kBF16).value()));
  EXPECT_EQ(Doubles(rm), Doubles(rm32));
  // bf16 parameters are refused, naming both.
  absl::StatusOr<Tensor> bad = BatchNorm(x, w.To(DType::kBF16).value(),
                                         Tensor(), rm, rv, true, 0.1, 1e-5);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("f32 weight"));
}

TEST(BatchNormTest, ArgumentErrors) {
  Tensor x = Tensor::Zeros({1, 3, 1, 1}, DType::kF32).value();
  Tensor c3 = Tensor::Zeros({3}, DType::kF32).value();
  absl::StatusOr<Tensor> one = BatchNorm(x, c3, c3, c3, c3, true, 0.1, 1e-5);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(one.status().message(),
              HasSubstr("Expected more than 1 value per channel when "
                        "training, got input size [1, 3, 1, 1]"));
  // Eval mode takes one value per channel.
  EXPECT_TRUE(BatchNorm(x, c3, c3, c3, c3, false, 0.1, 1e-5).ok());
  Tensor x2 = Tensor::Zeros({2, 3}, DType::kF32).value();
  Tensor c4 = Tensor::Zeros({4}, DType::kF32).value();
  EXPECT_THAT(BatchNorm(x2, c4, Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5)
                  .status()
                  .message(),
              HasSubstr("expected `weight` f32[3]"));
  EXPECT_THAT(BatchNorm(x2, Tensor(), Tensor(), c3, Tensor(), true, 0.1, 1e-5)
                  .status()
                  .message(),
              HasSubstr("both defined or both undefined"));
  EXPECT_THAT(
      BatchNorm(x2, Tensor(), Tensor(), Tensor(), Tensor(), false, 0.1, 1e-5)
          .status()
          .message(),
      HasSubstr("eval mode"));
  EXPECT_THAT(BatchNorm(Tensor::Zeros({3}, DType::kF32).value(), Tensor(),
                        Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5)
                  .status()
                  .message(),
              HasSubstr("[N, C, *]"));
  EXPECT_THAT(
      BatchNorm(x2, Tensor(), Tensor(), Tensor(), Tensor(), true, NAN, 1e-5)
          .status()
          .message(),
      HasSubstr("finite momentum"));
  EXPECT_THAT(BatchNorm(x2.To(DType::kF64).value(), c3, Tensor(), Tensor(),
                        Tensor(), true, 0.1, 1e-5)
                  .status()
                  .message(),
              HasSubstr("expected `weight` f64[3]"));
  EXPECT_THAT(BatchNormStatsOf(Tensor::Zeros({0, 3}, DType::kF32).value())
                  .status()
                  .message(),
              HasSubstr("at least one value per channel"));
  // Its rows: a CPU kernel for every piece.
  EXPECT_THAT(internal::DescribeKernelTable(),
              ::testing::IsSupersetOf({HasSubstr("BatchNormStats: cpu"),
                                       HasSubstr("BatchNormGatherStats: cpu"),
                                       HasSubstr("BatchNormElemt: cpu"),
                                       HasSubstr("BatchNormInvstd: cpu")}));
}

}  // namespace
}  // namespace tandem
