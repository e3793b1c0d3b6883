// LayerNorm (tensor/ops/layer_norm.cc): values and gradients against
// PyTorch 1.13's torch.nn.functional.layer_norm (a small case and a
// GPT-sized row), GradCheck in f64, f16/bf16 computed in f32, and the
// argument checks.
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
  std::vector<double> y, dx, dw, db;
  // x [2, 384]: every 37th value of y and dx, every 29th of dw and db.
  std::vector<double> yl, dxl, dwl, dbl;
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
//       x = torch.tensor(X(24), dtype=dt).reshape(2, 3, 4).requires_grad_()
//       g = torch.tensor(G(24), dtype=dt).reshape(2, 3, 4)
//       w = torch.tensor([0.5, -1.25, 2.0, 1.5], dtype=dt, requires_grad=True)
//       b = torch.tensor([0.1, 0.2, -0.3, 0.0], dtype=dt, requires_grad=True)
//       y = F.layer_norm(x, (4,), w, b, 1e-5); (y * g).sum().backward()
//       p('y', y); p('dx', x.grad); p('dw', w.grad); p('db', b.grad)
//       xl = torch.tensor([((i * 13) % 17 - 8) / 8 + 3.0 for i in range(768)],
//                         dtype=dt).reshape(2, 384).requires_grad_()
//       gl = torch.tensor([((i * 5) % 7 - 3) / 2 for i in range(768)],
//                         dtype=dt).reshape(2, 384)
//       wl = torch.tensor([((j * 3) % 5 - 2) / 4 + 1 for j in range(384)],
//                         dtype=dt, requires_grad=True)
//       bl = torch.zeros(384, dtype=dt, requires_grad=True)
//       yl = F.layer_norm(xl, (384,), wl, bl, 1e-5); (yl * gl).sum().backward()
//       p('yl', yl.reshape(-1)[::37]); p('dxl', xl.grad.reshape(-1)[::37])
//       p('dwl', wl.grad[::29]); p('dbl', bl.grad[::29])

const Reference kF64Ref = {
    /*y=*/{-0.5731827385915185,  -0.3409504149396129,  -1.1655206639033808,
           2.0195482157745555,   0.08089620511118874,  1.9671010272150422,
           2.5273616435440682,   0.057311384666433915, -0.3701239827613615,
           -1.6763720364598205,  0.32683197701514904,  -1.311398478229061,
           0.08089620511118889,  1.9671010272150422,   2.527361643544069,
           0.057311384666433846, -0.3701239827613616,  -1.6763720364598202,
           0.3268319770151485,   -1.3113984782290613,  0.5371328260763536,
           0.5917699856344684,   -3.302195258335713,   1.4103719482840846},
    /*dx=*/{-0.38175278590507533, -0.19928804199456684, 0.680132855274223,
            -0.09909202737458078, 2.330802640041085,    -0.10945521590679086,
            0.013936241462734755, -2.235283665597029,   -0.538075946098904,
            1.2699760059886986,   -2.5699044083843514,  1.838004348494557,
            0.5467607074411216,   -1.548179997923361,   -1.6039461587304973,
            2.605365449212738,    -0.9792430670328583,  -1.0701516459086933,
            2.08594271221137,     -0.03654799926981894, -0.4273780450663134,
            0.8846187162480019,   -0.44267705723830897, -0.014563613943382236},
    /*dw=*/
    {0.5657522446202341, -0.5982133144548037, -4.171751278458139,
     -3.1140005763772627},
    /*db=*/{1.0, -1.5, -0.5, 0.5},
    /*yl=*/{-0.8135282668014934,  -0.45636628074077923, 0.41007978496090874,
            1.7858099303035706,   -1.523873457050727,   0.0013262606240648234,
            0.7659155103975581,   -1.4233429017465973,  -0.5059684280808118,
            0.9206901252259474,   0.816180788049623,    -1.2283890157915245,
            0.10136803444153575,  0.9182986112203695,   -1.2275908422919848,
            -0.2574109536015379,  1.2235999747942863,   -0.8181278370281433,
            -0.46094519598414907, 0.4070684847652224,   1.785913205219971},
    /*dxl=*/{-1.1853587158139227,   0.01248010914899754, 2.4326007252502553,
             -1.0549739824837836,   2.4668208778958385,  -0.8170401979818107,
             0.5845122588374994,    -2.4125291001873435, 0.0075915159139141875,
             3.649993923153509,     -0.4487216801496985, 2.4651612676967023,
             -0.8179352445952746,   0.5986138084022194,  -2.4333055702038946,
             0.0049055622043539665, 3.6691111899055078,  -0.38447026811136065,
             1.2364112007682844,    -1.6380204797593905, 1.004523068531009},
    /*dwl=*/
    {2.1348843500807932, -2.8525128604745573, -1.6362556740562866,
     -0.2063661531045192, 1.636521751773913, 1.0184280754460355,
     1.1195381091380607, 0.5039377271781544, 1.9468237766529437,
     -0.818926010527683, -1.0212206805300774, 2.0414738793836467,
     0.9202839636724088, 1.1207756771895834},
    /*dbl=*/
    {-2.0, -0.5, 1.0, -1.0, 0.5, 2.0, 0.0, -2.0, -0.5, 1.0, -1.0, 0.5, 2.0,
     0.0},
};
const Reference kF32Ref = {
    /*y=*/{-0.5731827020645142, -0.34095048904418945, -1.1655206680297852,
           2.019548177719116,   0.08089615404605865,  1.9671010971069336,
           2.5273616313934326,  0.05731126666069031,  -0.3701240122318268,
           -1.6763718128204346, 0.3268318176269531,   -1.3113986253738403,
           0.08089616894721985, 1.9671010971069336,   2.5273616313934326,
           0.05731116235256195, -0.3701240122318268,  -1.6763719320297241,
           0.3268316388130188,  -1.3113987445831299,  0.537132740020752,
           0.5917701721191406,  -3.3021955490112305,  1.4103715419769287},
    /*dx=*/{-0.38175272941589355, -0.199288010597229,    0.6801328659057617,
            -0.09909200668334961, 2.3308026790618896,    -0.1094551682472229,
            0.013936281204223633, -2.235283374786377,    -0.5380759835243225,
            1.2699759006500244,   -2.569904327392578,    1.8380041122436523,
            0.5467605590820312,   -1.5481798648834229,   -1.6039459705352783,
            2.60536527633667,     -0.979243278503418,    -1.070151448249817,
            2.085942506790161,    -0.036548152565956116, -0.42737817764282227,
            0.8846187591552734,   -0.44267702102661133,  -0.014563560485839844},
    /*dw=*/
    {0.5657520294189453, -0.5982130169868469, -4.171751499176025,
     -3.1140005588531494},
    /*db=*/{1.0, -1.5, -0.5, 0.5},
    /*yl=*/{-0.8135279417037964,  -0.4563658833503723, 0.410080224275589,
            1.7858102321624756,   -1.5238726139068604, 0.0013265013694763184,
            0.7659157514572144,   -1.423342227935791,  -0.5059677958488464,
            0.9206907749176025,   0.816180944442749,   -1.2283891439437866,
            0.10136798024177551,  0.9182984828948975,  -1.2275909185409546,
            -0.25741106271743774, 1.2235997915267944,  -0.8181278705596924,
            -0.4609452486038208,  0.4070683717727661,  1.785913109779358},
    /*dxl=*/{-1.1853586435317993,   0.012480095028877258, 2.432600498199463,
             -1.054973840713501,    2.466820478439331,    -0.8170400857925415,
             0.5845122337341309,    -2.4125289916992188,  0.007591508328914642,
             3.649993419647217,     -0.44872167706489563, 2.4651613235473633,
             -0.8179352283477783,   0.5986137390136719,   -2.433305501937866,
             0.0049055591225624084, 3.6691110134124756,   -0.38447025418281555,
             1.2364110946655273,    -1.6380205154418945,  1.0045230388641357},
    /*dwl=*/
    {2.134883403778076, -2.8525121212005615, -1.6362557411193848,
     -0.2063666135072708, 1.6365224123001099, 1.018428087234497,
     1.1195377111434937, 0.5039368867874146, 1.9468244314193726,
     -0.8189260959625244, -1.0212210416793823, 2.0414743423461914,
     0.9202839732170105, 1.1207753419876099},
    /*dbl=*/
    {-2.0, -0.5, 1.0, -1.0, 0.5, 2.0, 0.0, -2.0, -0.5, 1.0, -1.0, 0.5, 2.0,
     0.0},
};

std::vector<double> Every(const std::vector<double>& v, size_t step) {
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); i += step) out.push_back(v[i]);
  return out;
}

void CheckAgainstTorch(DType dtype, const Reference& ref, double tol) {
  SCOPED_TRACE(DTypeName(dtype));
  Tensor x = Make(X(24), {2, 3, 4}, dtype);
  Tensor w = Make({0.5, -1.25, 2.0, 1.5}, {4}, dtype);
  Tensor b = Make({0.1, 0.2, -0.3, 0.0}, {4}, dtype);
  for (const Tensor& t : {x, w, b}) ASSERT_TRUE(t.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> y = LayerNorm(x, {4}, w, b, 1e-5);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->dtype(), dtype);
  EXPECT_EQ(y->shape(), x.shape());
  ASSERT_TRUE(Sum(Mul(*y, Make(G(24), {2, 3, 4}, dtype)).value())
                  .value()
                  .Backward()
                  .ok());
  ExpectNear(*y, ref.y, tol, "y");
  ExpectNear(x.grad(), ref.dx, tol, "dx");
  ExpectNear(w.grad(), ref.dw, tol, "dw");
  ExpectNear(b.grad(), ref.db, tol, "db");

  std::vector<double> xl(768), gl(768), wl(384);
  for (int i = 0; i < 768; ++i) {
    xl[i] = ((i * 13) % 17 - 8) / 8.0 + 3.0;
    gl[i] = ((i * 5) % 7 - 3) / 2.0;
  }
  for (int j = 0; j < 384; ++j) wl[j] = ((j * 3) % 5 - 2) / 4.0 + 1;
  Tensor tx = Make(xl, {2, 384}, dtype), tw = Make(wl, {384}, dtype);
  Tensor tb = Tensor::Zeros({384}, dtype).value();
  for (const Tensor& t : {tx, tw, tb}) {
    ASSERT_TRUE(t.set_requires_grad(true).ok());
  }
  Tensor yl = LayerNorm(tx, {384}, tw, tb, 1e-5).value();
  ASSERT_TRUE(
      Sum(Mul(yl, Make(gl, {2, 384}, dtype)).value()).value().Backward().ok());
  auto every = [](const Tensor& t, size_t step) {
    return Tensor::FromVector(Every(Doubles(t), step)).value();
  };
  ExpectNear(every(yl, 37), ref.yl, tol, "y, 384 wide");
  ExpectNear(every(tx.grad(), 37), ref.dxl, tol, "dx, 384 wide");
  ExpectNear(every(tw.grad(), 29), ref.dwl, tol, "dw, 384 wide");
  ExpectNear(every(tb.grad(), 29), ref.dbl, tol, "db, 384 wide");
}

TEST(LayerNormTest, MatchesPyTorch) {
  CheckAgainstTorch(DType::kF64, kF64Ref, 1e-13);
  // f32: within 4e-7 * (1 + |expected|), a few ulps (outputs within 2e-7,
  // the weight gradient of the wide row within 4e-7): PyTorch's mean,
  // variance and column sums are float reductions, ours double sums; both
  // round to float.
  CheckAgainstTorch(DType::kF32, kF32Ref, 4e-7);
}

TEST(LayerNormTest, GradCheck) {
  std::mt19937 rng(9);
  for (bool affine : {true, false}) {
    SCOPED_TRACE(affine ? "affine" : "no affine");
    std::vector<Tensor> in = {RandomTensor({3, 2, 5}, rng, -2, 2)};
    if (affine) {
      in.push_back(RandomTensor({2, 5}, rng, 0.5, 2));
      in.push_back(RandomTensor({2, 5}, rng));
    }
    absl::Status s = GradCheck(
        [affine](const std::vector<Tensor>& t) {
          return LayerNorm(t[0], {2, 5}, affine ? t[1] : Tensor(),
                           affine ? t[2] : Tensor(), 1e-5);
        },
        in);
    EXPECT_TRUE(s.ok()) << s;
  }
  // Bias alone (its gradient has normalized_shape).
  std::vector<Tensor> in = {RandomTensor({4, 6}, rng, -2, 2),
                            RandomTensor({6}, rng)};
  absl::Status s = GradCheck(
      [](const std::vector<Tensor>& t) {
        return LayerNorm(t[0], {6}, Tensor(), t[1], 1e-5);
      },
      in);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(LayerNormTest, LowPrecisionComputesInF32) {
  std::mt19937 rng(10);
  Tensor x = RandomTensor({3, 8}, rng, -2, 2, false).To(DType::kBF16).value();
  Tensor w = RandomTensor({8}, rng, 0.5, 2, false).To(DType::kF32).value();
  Tensor y = LayerNorm(x, {8}, w, Tensor()).value();
  EXPECT_EQ(y.dtype(), DType::kBF16);
  Tensor y32 = LayerNorm(x.To(DType::kF32).value(), {8}, w, Tensor()).value();
  EXPECT_EQ(Doubles(y), Doubles(y32.To(DType::kBF16).value()));
}

TEST(LayerNormTest, EmptyBatch) {
  Tensor x = Tensor::Zeros({0, 4}, DType::kF32).value();
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  Tensor w = Tensor::Ones({4}, DType::kF32).value();
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  Tensor y = LayerNorm(x, {4}, w, Tensor()).value();
  EXPECT_EQ(y.shape(), x.shape());
  ASSERT_TRUE(Sum(y).value().Backward().ok());
  EXPECT_EQ(Doubles(w.grad()), std::vector<double>(4, 0.0));
}

TEST(LayerNormTest, ArgumentErrors) {
  Tensor x = Tensor::Zeros({2, 3, 4}, DType::kF32).value();
  EXPECT_THAT(LayerNorm(x, {3}, Tensor(), Tensor()).status().message(),
              HasSubstr("normalized_shape [3] must be non-empty and equal the "
                        "trailing dims of x, got x f32[2, 3, 4]"));
  EXPECT_THAT(LayerNorm(x, {}, Tensor(), Tensor()).status().message(),
              HasSubstr("must be non-empty"));
  EXPECT_THAT(LayerNorm(x, {2, 3, 4, 1}, Tensor(), Tensor()).status().message(),
              HasSubstr("trailing dims"));
  EXPECT_THAT(LayerNorm(x, {3, 4}, Tensor::Ones({4}).value(), Tensor())
                  .status()
                  .message(),
              HasSubstr("expected `weight` f32[3, 4]"));
  EXPECT_THAT(
      LayerNorm(x, {4}, Tensor(), Tensor::Ones({4}, DType::kF64).value())
          .status()
          .message(),
      HasSubstr("expected `bias` f32[4]"));
  EXPECT_THAT(LayerNorm(x, {4}, Tensor(), Tensor(), -1).status().message(),
              HasSubstr("eps >= 0"));
  EXPECT_THAT(LayerNorm(Tensor::Zeros({4}, DType::kI64).value(), {4}, Tensor(),
                        Tensor())
                  .status()
                  .message(),
              HasSubstr("LayerNorm: `x` is i64[4]"));
  EXPECT_THAT(internal::DescribeKernelTable(),
              ::testing::IsSupersetOf({HasSubstr("LayerNorm: cpu"),
                                       HasSubstr("LayerNormBackward: cpu")}));
}

}  // namespace
}  // namespace tandem
