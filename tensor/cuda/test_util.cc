#include "tensor/cuda/test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/tensor.h"

namespace tandem::cuda_test {

Tensor Random(const Shape& shape, DType dtype, uint32_t seed, double lo,
              double hi) {
  const DType draw = dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  Tensor t = Tensor::Empty(shape, draw).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (draw == DType::kF64) {
      t.data<double>()[i] = dist(rng);
    } else {
      t.data<float>()[i] = static_cast<float>(dist(rng));
    }
  }
  if (dtype == draw) return t;
  return t.To(dtype).value();
}

Tensor ToCuda(const Tensor& t) {
  absl::StatusOr<Tensor> out = t.To(kGpu);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Tensor();
}

Tensor ToHost(const Tensor& t) {
  absl::StatusOr<Tensor> out = t.To(Device::CPU());
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Tensor();
}

std::vector<double> Values(const Tensor& t) {
  Tensor host = t.device().is_cpu() ? t.Detach() : ToHost(t);
  return host.To(DType::kF64).value().ToVector<double>().value();
}

void ExpectClose(const Tensor& actual, const Tensor& expected, double rtol,
                 const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  ASSERT_TRUE(expected.defined()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  const std::vector<double> a = Values(actual);
  const std::vector<double> e = Values(expected);
  double scale = 0;
  for (double v : e) {
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  }
  int reported = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(e[i]) || std::isnan(a[i])) {
      EXPECT_EQ(std::isnan(a[i]), std::isnan(e[i]))
          << what << " [" << i << "]: " << a[i] << " vs " << e[i];
      continue;
    }
    if (std::isinf(e[i])) {
      EXPECT_EQ(a[i], e[i]) << what << " [" << i << "]";
      continue;
    }
    const double tol = rtol * (std::abs(e[i]) + scale);
    if (std::abs(a[i] - e[i]) > tol && reported++ < 5) {
      ADD_FAILURE() << what << " [" << i << "]: got " << a[i] << ", expected "
                    << e[i] << " (diff " << std::abs(a[i] - e[i])
                    << " > tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(reported, 0) << what << ": elements outside tolerance";
}

void ExpectBitwiseEqual(const Tensor& actual, const Tensor& expected,
                        const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  const Tensor a = actual.device().is_cpu() ? actual : ToHost(actual);
  const Tensor e = expected.device().is_cpu() ? expected : ToHost(expected);
  if (a.nbytes() == 0) return;
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pe = static_cast<const unsigned char*>(e.raw_data());
  const int64_t esize = DTypeSize(a.dtype());
  int reported = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i * esize, pe + i * esize, esize) == 0) continue;
    if (IsFloatingPoint(a.dtype()) &&
        std::isnan(a.Detach().View(i, {}).value().Item().value()) &&
        std::isnan(e.Detach().View(i, {}).value().Item().value())) {
      continue;  // NaN payloads and signs are not part of the contract
    }
    if (reported++ < 5) {
      const Tensor ai = a.Detach().View(i, {}).value();
      const Tensor ei = e.Detach().View(i, {}).value();
      ADD_FAILURE() << what << " [" << i << "]: " << ai.Item().value() << " vs "
                    << ei.Item().value() << " (bits differ)";
    }
  }
  EXPECT_EQ(reported, 0) << what << ": elements differ";
}

}  // namespace tandem::cuda_test
