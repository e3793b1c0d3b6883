// nn::PyFloatRepr against Python 3's repr(float): the shortest digits that
// round-trip, fixed or exponent notation where Python switches.
#include "tensor/nn/py_repr.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace tandem::nn {
namespace {

TEST(PyFloatReprTest, MatchesPythonRepr) {
  // Expected values are Python 3's repr() of the same doubles.
  EXPECT_EQ(PyFloatRepr(1.0), "1.0");
  EXPECT_EQ(PyFloatRepr(0.5), "0.5");
  EXPECT_EQ(PyFloatRepr(2.0 / 3.0), "0.6666666666666666");
  // float32(2/3) widened, what (correct / total).item() gives in PyTorch.
  EXPECT_EQ(PyFloatRepr(static_cast<double>(2.f / 3.f)), "0.6666666865348816");
  EXPECT_EQ(PyFloatRepr(0.0), "0.0");
  EXPECT_EQ(PyFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(PyFloatRepr(0.1), "0.1");
  EXPECT_EQ(PyFloatRepr(100.0), "100.0");
  EXPECT_EQ(PyFloatRepr(123.456), "123.456");
  EXPECT_EQ(PyFloatRepr(0.0001), "0.0001");
  EXPECT_EQ(PyFloatRepr(0.00012), "0.00012");
  EXPECT_EQ(PyFloatRepr(1e-5), "1e-05");
  EXPECT_EQ(PyFloatRepr(-1.5e-7), "-1.5e-07");
  EXPECT_EQ(PyFloatRepr(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(PyFloatRepr(1e16), "1e+16");
  EXPECT_EQ(PyFloatRepr(1.5e16), "1.5e+16");
  EXPECT_EQ(PyFloatRepr(1e22), "1e+22");
  EXPECT_EQ(PyFloatRepr(12345678901234567890.0), "1.2345678901234567e+19");
  EXPECT_EQ(PyFloatRepr(5e-324), "5e-324");
  EXPECT_EQ(PyFloatRepr(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(PyFloatRepr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(PyFloatRepr(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(PyFloatRepr(std::nan("")), "nan");
}

}  // namespace
}  // namespace tandem::nn
