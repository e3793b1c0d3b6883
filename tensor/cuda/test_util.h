// Test-only helpers for the GPU tests of tensor/cuda: skipping without a
// device, random inputs, host copies and elementwise comparisons.
//
//   TEST(Foo, Bar) {
//     TANDEM_REQUIRE_CUDA();   // GTEST_SKIP with the reason when no device
//     Tensor x = cuda_test::Random({4, 5}, DType::kF32, /*seed=*/1);
//     Tensor y = Relu(cuda_test::ToCuda(x)).value();
//     cuda_test::ExpectClose(y, Relu(x).value(), 1e-6, "relu");
//   }
#ifndef TANDEM_TENSOR_CUDA_TEST_UTIL_H_
#define TANDEM_TENSOR_CUDA_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/cuda/cuda.h"
#include "tensor/tensor.h"

#define TANDEM_REQUIRE_CUDA()                                        \
  do {                                                               \
    std::string tandem_no_cuda_reason_;                              \
    if (::tandem::cuda::DeviceCount(&tandem_no_cuda_reason_) == 0) { \
      GTEST_SKIP() << tandem_no_cuda_reason_;                        \
    }                                                                \
  } while (false)

namespace tandem::cuda_test {

inline const Device kGpu = Device::CUDA(0);

// A CPU tensor of `dtype` with values uniform in [lo, hi) drawn from a
// generator seeded with `seed` (f16/bf16: drawn as f32, then rounded).
Tensor Random(const Shape& shape, DType dtype, uint32_t seed, double lo = -2,
              double hi = 2);

// Copies to cuda:0 / to the host (failing the test on error).
Tensor ToCuda(const Tensor& t);
Tensor ToHost(const Tensor& t);

// A host copy of any tensor's values as doubles.
std::vector<double> Values(const Tensor& t);

// Expects equal shapes and |actual - expected| <= rtol * (|expected| +
// max |expected|) elementwise (a relative bound with an absolute floor at
// the tensor's scale, for sums with cancellation). NaNs must match.
// `actual` may be on the device; `what` names the comparison.
void ExpectClose(const Tensor& actual, const Tensor& expected, double rtol,
                 const std::string& what);

// Expects the same shape, dtype and bytes, except that any NaN equals any
// NaN (conversions between f32 and f64 on a GPU may canonicalise NaNs).
void ExpectBitwiseEqual(const Tensor& actual, const Tensor& expected,
                        const std::string& what);

}  // namespace tandem::cuda_test

#endif  // TANDEM_TENSOR_CUDA_TEST_UTIL_H_
