// Test-only helpers of the normalisation tests (tensor/ops/batch_norm_test,
// tensor/nn/layers/batch_norm_test, the LayerNorm tests): the inputs their
// PyTorch scripts build, computed the same way (exact in double), and
// comparisons with the printed numbers.
#ifndef TANDEM_TENSOR_TESTING_NORM_TEST_UTIL_H_
#define TANDEM_TENSOR_TESTING_NORM_TEST_UTIL_H_

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/tensor.h"

namespace tandem::norm_test {

// The scripts' X(n, shift): ((i * 7) % 11 - 5) / 4 + 0.1 * i + shift.
inline std::vector<double> X(int n, double shift = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(((i * 7) % 11 - 5) / 4.0 + 0.1 * i + shift);
  }
  return v;
}

// The scripts' G(n): ((i * 5) % 7 - 3) / 2, the output weights of the
// checked loss sum(y * g).
inline std::vector<double> G(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(((i * 5) % 7 - 3) / 2.0);
  return v;
}

// `v` as a `dtype` tensor of `shape` (rounded from double, as torch.tensor
// rounds a Python list).
inline Tensor Make(const std::vector<double>& v, Shape shape, DType dtype) {
  return Tensor::FromVector(v, std::move(shape)).value().To(dtype).value();
}

inline std::vector<double> Doubles(const Tensor& t) {
  return t.To(DType::kF64).value().ToVector<double>().value();
}

// |t[i] - expected[i]| <= tol * (1 + |expected[i]|) for every i.
inline void ExpectNear(const Tensor& t, const std::vector<double>& expected,
                       double tol, const std::string& what) {
  const std::vector<double> got = Doubles(t);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], tol * (1 + std::abs(expected[i])))
        << what << "[" << i << "]";
  }
}

}  // namespace tandem::norm_test

#endif  // TANDEM_TENSOR_TESTING_NORM_TEST_UTIL_H_
