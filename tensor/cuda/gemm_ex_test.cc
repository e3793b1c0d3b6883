// f16 and bf16 MatMul/Linear on CUDA run on cublasGemmEx with 16-bit
// operands and f32 compute (tensor cores): against the f64 product of the
// same rounded operands within the output's rounding plus f32 summation,
// and with no f32 copies of the operands (one allocation: the output).
// Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/autograd/autograd.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/memory.h"
#include "tensor/cuda/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::tandem::cuda_test::kGpu;
using ::tandem::cuda_test::Random;
using ::tandem::cuda_test::ToCuda;
using ::tandem::cuda_test::ToHost;

// One unit in the last place of a 16-bit format at |v|: 2^(e - 10) for f16
// (10 mantissa bits), 2^(e - 7) for bf16, with v in [2^e, 2^(e+1)).
double Ulp(DType dtype, double v) {
  int e = 0;
  std::frexp(v == 0 ? 1e-30 : v, &e);  // v = m 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 1 - (dtype == DType::kF16 ? 10 : 7));
}

// C = op(A) op(B) on the GPU in `dtype` against f64 sums of the same
// 16-bit values: |got - ref| <= one ulp of the output (f32 result rounded
// once) + 2^-20 sum_k |a_ik b_kj| (f32 accumulation over K <= 512 terms).
void CheckMatMul(DType dtype, bool ta, bool tb) {
  SCOPED_TRACE(std::string(DTypeName(dtype)) + (ta ? " A^T" : " A") +
               (tb ? " B^T" : " B"));
  constexpr int64_t m = 37, n = 53, k = 300;
  const Tensor a16 =
      Random(ta ? Shape{k, m} : Shape{m, k}, DType::kF64, 11).To(dtype).value();
  const Tensor b16 =
      Random(tb ? Shape{n, k} : Shape{k, n}, DType::kF64, 12).To(dtype).value();
  const std::vector<double> a =
      a16.To(DType::kF64).value().ToVector<double>().value();
  const std::vector<double> b =
      b16.To(DType::kF64).value().ToVector<double>().value();

  ASSERT_TRUE(cuda::Synchronize(0).ok());
  const Tensor da = ToCuda(a16), db = ToCuda(b16);
  const int64_t allocations = cuda::GetMemoryStats(0)->num_allocations;
  absl::StatusOr<Tensor> c = MatMul(da, db, ta, tb);
  ASSERT_TRUE(c.ok()) << c.status();
  // Only the output: the f32 route would allocate two operand copies, an
  // f32 product and its rounding.
  EXPECT_EQ(cuda::GetMemoryStats(0)->num_allocations, allocations + 1);
  EXPECT_EQ(c->dtype(), dtype);
  const std::vector<double> got =
      ToHost(*c).To(DType::kF64).value().ToVector<double>().value();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * m + i] : a[i * k + p];
        const double y = tb ? b[j * k + p] : b[p * n + j];
        ref += x * y;
        mag += std::fabs(x * y);
      }
      ASSERT_LE(std::fabs(got[i * n + j] - ref),
                Ulp(dtype, ref) + std::ldexp(mag, -20))
          << "C[" << i << ", " << j << "]";
    }
  }
}

TEST(GemmExTest, Bf16MatMulMatchesTheF64ProductOfItsOperands) {
  TANDEM_REQUIRE_CUDA();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) CheckMatMul(DType::kBF16, ta, tb);
  }
}

TEST(GemmExTest, F16MatMulMatchesTheF64ProductOfItsOperands) {
  TANDEM_REQUIRE_CUDA();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) CheckMatMul(DType::kF16, ta, tb);
  }
}

// Linear forward and backward in f16/bf16 on the GPU against the same op
// in f32 on the GPU (the f32 product of the rounded operands, rounded):
// within a 16-bit rounding of the result and of the f32 sums.
TEST(GemmExTest, LinearForwardAndBackwardAgreeWithF32) {
  TANDEM_REQUIRE_CUDA();
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const double tol = dtype == DType::kF16 ? 2e-3 : 1.6e-2;  // ~2 ulps
    const Tensor x0 = Random({16, 64}, DType::kF64, 21).To(dtype).value();
    const Tensor w0 = Random({24, 64}, DType::kF64, 22).To(dtype).value();
    auto run = [&](DType compute) {
      Tensor x = ToCuda(x0.To(compute).value());
      Tensor w = ToCuda(w0.To(compute).value());
      EXPECT_TRUE(x.set_requires_grad(true).ok());
      EXPECT_TRUE(w.set_requires_grad(true).ok());
      Tensor y = Linear(x, w, Tensor()).value();
      EXPECT_EQ(y.dtype(), compute);
      EXPECT_TRUE(Sum(y).value().Backward().ok());
      return std::vector<Tensor>{ToHost(y), ToHost(x.grad()), ToHost(w.grad())};
    };
    const std::vector<Tensor> low = run(dtype), ref = run(DType::kF32);
    for (size_t t = 0; t < low.size(); ++t) {
      const std::vector<float> l =
          low[t].To(DType::kF32).value().ToVector<float>().value();
      const std::vector<float> r = ref[t].ToVector<float>().value();
      ASSERT_EQ(l.size(), r.size());
      for (size_t i = 0; i < l.size(); ++i) {
        ASSERT_NEAR(l[i], r[i], tol * (1 + std::fabs(r[i])))
            << "tensor " << t << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace tandem
