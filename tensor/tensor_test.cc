#include "tensor/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/autograd/autograd.h"
#include "tensor/ops.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TensorTest, UndefinedTensor) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.raw_data(), nullptr);
  EXPECT_EQ(t.data<float>(), nullptr);
  EXPECT_EQ(t.dim(0), -1);
  EXPECT_EQ(t.ToString(), "Tensor(undefined)");
  EXPECT_FALSE(t.CheckedData<float>().ok());
}

TEST(TensorTest, Factories) {
  Tensor z = Tensor::Zeros({2, 3}).value();
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.ndim(), 2);
  EXPECT_EQ(z.dim(0), 2);
  EXPECT_EQ(z.dim(-1), 3);
  EXPECT_EQ(z.dim(2), -1);
  EXPECT_EQ(z.dim(-3), -1);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.nbytes(), 24);
  EXPECT_EQ(z.dtype(), DType::kF32);
  EXPECT_TRUE(z.device().is_cpu());
  EXPECT_THAT(z.ToVector<float>().value(), ElementsAre(0, 0, 0, 0, 0, 0));

  Tensor o = Tensor::Ones({3}, DType::kF64).value();
  EXPECT_THAT(o.ToVector<double>().value(), ElementsAre(1, 1, 1));
  Tensor f = Tensor::Full({2}, 2.5, DType::kI64).value();
  EXPECT_THAT(f.ToVector<int64_t>().value(), ElementsAre(2, 2));
  Tensor h = Tensor::Full({1}, 1.0 / 3.0, DType::kF16).value();
  EXPECT_EQ(h.data<Half>()[0].bits, 0x3555);
  EXPECT_EQ(h.nbytes(), 2);

  Tensor s = Tensor::Scalar(4.0).value();
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.Item().value(), 4.0);

  Tensor e = Tensor::Empty({0, 5}).value();
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0);
  EXPECT_TRUE(e.ToVector<float>().value().empty());
}

// Half and BFloat16 (base/dtype.h) hold base/half.h's encodings.
TEST(DTypeTest, HalfAndBFloat16StoreTheEncodingAndConvertBack) {
  Half h(1.0f / 3.0f);
  EXPECT_EQ(h.bits, 0x3555);
  EXPECT_EQ(static_cast<float>(h), 0.333251953125f);
  EXPECT_EQ(Half::FromBits(0x3C00).bits, 0x3C00);
  EXPECT_EQ(static_cast<float>(Half::FromBits(0x7C00)),
            std::numeric_limits<float>::infinity());
  BFloat16 b(1.0f / 3.0f);
  EXPECT_EQ(b.bits, 0x3EAB);
  EXPECT_EQ(static_cast<float>(BFloat16::FromBits(0x3F80)), 1.0f);
  EXPECT_EQ(DTypeOf<Half>::value, DType::kF16);
  EXPECT_EQ(DTypeOf<BFloat16>::value, DType::kBF16);
}

TEST(TensorTest, SetDataMakesTheTensorViewTheSourceKeepingItsIdentity) {
  Tensor param = *Tensor::FromVector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  ASSERT_TRUE(param.set_requires_grad(true).ok());
  ASSERT_TRUE(param.set_grad(*Tensor::Zeros({2, 2})).ok());
  const Tensor handle = param;  // another handle to the same tensor
  Tensor flat = *Tensor::FromVector(std::vector<float>{0, 5, 6, 7, 8, 0});
  ASSERT_TRUE(param.SetData(*flat.View(1, {4})).ok());
  EXPECT_THAT(*handle.ToVector<float>(), ElementsAre(5, 6, 7, 8));
  EXPECT_THAT(handle.shape(), ElementsAre(2, 2));
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_TRUE(handle.has_grad());
  EXPECT_TRUE(handle.SharesStorageWith(flat));
  flat.data<float>()[1] = 50;  // writes through the flat buffer show
  EXPECT_EQ(handle.data<float>()[0], 50);

  const absl::Status wrong = param.SetData(*Tensor::Zeros({3}));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.message(), HasSubstr("element count must match"));
  EXPECT_EQ(param.SetData(*Tensor::Zeros({4}, DType::kF64)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, SetDataWithDtypeTakesTheSourcesDtype) {
  Tensor param = *Tensor::FromVector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  ASSERT_TRUE(param.set_requires_grad(true).ok());
  const Tensor handle = param;
  Tensor low = *Tensor::FromVector(std::vector<float>{0, 5, 6, 7, 8});
  low = *low.To(DType::kBF16);
  ASSERT_TRUE(param.SetDataWithDtype(*low.View(1, {4})).ok());
  EXPECT_EQ(handle.dtype(), DType::kBF16);
  EXPECT_THAT(handle.shape(), ElementsAre(2, 2));
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_THAT(*handle.To(DType::kF32)->ToVector<float>(),
              ElementsAre(5, 6, 7, 8));

  // A gradient of the old dtype must go first.
  ASSERT_TRUE(param.set_grad(*Tensor::Zeros({2, 2}, DType::kBF16)).ok());
  const absl::Status with_grad =
      param.SetDataWithDtype(*Tensor::Zeros({4}, DType::kF32));
  EXPECT_EQ(with_grad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(with_grad.message(), HasSubstr("ClearGrad"));
  param.ClearGrad();
  const absl::Status integer =
      param.SetDataWithDtype(*Tensor::Zeros({4}, DType::kI64));
  EXPECT_EQ(integer.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(integer.message(), HasSubstr("floating"));
  EXPECT_EQ(param.SetDataWithDtype(*Tensor::Zeros({3})).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(param.SetDataWithDtype(*Tensor::Zeros({4})).ok());
  EXPECT_EQ(handle.dtype(), DType::kF32);
}

TEST(TensorTest, NegativeShapeIsAnError) {
  absl::StatusOr<Tensor> t = Tensor::Zeros({2, -1});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("[2, -1]"));
}

TEST(TensorTest, CudaWithoutAllocatorIsAnError) {
  absl::StatusOr<Tensor> t = Tensor::Empty({2}, DType::kF32, Device::CUDA(0));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("cuda:0"));
}

TEST(TensorTest, FromVectorChecksShape) {
  Tensor t =
      Tensor::FromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).value();
  EXPECT_EQ(t.data<float>()[4], 5.f);
  Tensor v = Tensor::FromVector(std::vector<int64_t>{7, 8}).value();
  EXPECT_EQ(v.shape(), Shape{2});
  EXPECT_EQ(v.dtype(), DType::kI64);

  absl::StatusOr<Tensor> bad =
      Tensor::FromVector(std::vector<float>{1, 2, 3}, {2, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("3 values"));
  EXPECT_THAT(bad.status().message(), HasSubstr("[2, 2]"));
}

TEST(TensorTest, TypedAccessIsChecked) {
  Tensor t = Tensor::Zeros({2}, DType::kF64).value();
  EXPECT_NE(t.data<double>(), nullptr);
  EXPECT_EQ(t.data<float>(), nullptr);
  absl::StatusOr<float*> p = t.CheckedData<float>();
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("f32"));
  EXPECT_THAT(p.status().message(), HasSubstr("f64"));
  EXPECT_FALSE(t.ToVector<int32_t>().ok());
  EXPECT_FALSE(t.Item().ok());  // two elements
}

TEST(TensorTest, CopyIsAnAlias) {
  Tensor a = Tensor::Zeros({3}).value();
  Tensor b = a;
  b.data<float>()[1] = 7;
  EXPECT_EQ(a.data<float>()[1], 7);
  EXPECT_EQ(a.impl(), b.impl());
}

TEST(TensorTest, ViewAliasesStorage) {
  Tensor flat = Tensor::Zeros({10}).value();
  Tensor v = flat.View(4, {2, 3}).value();
  EXPECT_TRUE(v.SharesStorageWith(flat));
  EXPECT_EQ(v.storage_offset(), 4);
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  v.data<float>()[0] = 1;
  v.data<float>()[5] = 2;
  EXPECT_EQ(flat.data<float>()[4], 1);
  EXPECT_EQ(flat.data<float>()[9], 2);
  // A view of a view composes offsets.
  Tensor vv = v.View(3, {3}).value();
  EXPECT_EQ(vv.storage_offset(), 7);
  vv.data<float>()[2] = 3;
  EXPECT_EQ(flat.data<float>()[9], 3);
  // The storage outlives the original handle.
  flat = Tensor();
  EXPECT_EQ(v.data<float>()[5], 3);
}

TEST(TensorTest, ViewOutOfRangeIsAnError) {
  Tensor flat = Tensor::Zeros({10}).value();
  absl::StatusOr<Tensor> v = flat.View(8, {3});
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("offset 8"));
  EXPECT_THAT(v.status().message(), HasSubstr("f32[10]"));
  EXPECT_FALSE(flat.View(-1, {1}).ok());
  EXPECT_TRUE(flat.View(10, {0}).ok());
}

TEST(TensorTest, ReshapeIsAViewAndChecksSize) {
  Tensor t =
      Tensor::FromVector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).value();
  Tensor r = t.Reshape({3, -1}).value();
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_TRUE(r.SharesStorageWith(t));
  EXPECT_EQ(r.raw_data(), t.raw_data());
  absl::StatusOr<Tensor> bad = t.Reshape({4, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("[4, 2]"));
  EXPECT_THAT(bad.status().message(), HasSubstr("f32[2, 3]"));
  EXPECT_FALSE(t.Reshape({-1, -1}).ok());
  EXPECT_FALSE(t.Reshape({4, -1}).ok());
}

TEST(TensorTest, CloneAndDetach) {
  Tensor t = Tensor::FromVector(std::vector<float>{1, 2}).value();
  ASSERT_TRUE(t.set_requires_grad(true).ok());
  Tensor c = t.Clone().value();
  EXPECT_FALSE(c.SharesStorageWith(t));
  c.data<float>()[0] = 9;
  EXPECT_EQ(t.data<float>()[0], 1);
  Tensor d = t.Detach();
  EXPECT_TRUE(d.SharesStorageWith(t));
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
}

TEST(TensorTest, ToConvertsBetweenDtypes) {
  Tensor t =
      Tensor::FromVector(std::vector<float>{1.5f, -2.7f, 65520.f, 1.0f / 3.0f})
          .value();
  Tensor h = t.To(DType::kF16).value();
  EXPECT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(h.data<Half>()[2].bits, 0x7C00);  // overflow to inf
  Tensor back = h.To(DType::kF32).value();
  EXPECT_THAT(
      back.ToVector<float>().value(),
      ElementsAre(1.5f, -2.69921875f, std::numeric_limits<float>::infinity(),
                  0.333251953125f));
  Tensor b = t.To(DType::kBF16).value();
  EXPECT_EQ(b.data<BFloat16>()[3].bits, 0x3EAB);
  Tensor d = t.To(DType::kF64).value();
  EXPECT_EQ(d.data<double>()[1], static_cast<double>(-2.7f));
  Tensor i = t.To(DType::kI64).value();
  EXPECT_THAT(i.ToVector<int64_t>().value(), ElementsAre(1, -2, 65520, 0));
}

TEST(TensorTest, FloatToIntSaturatesAndMapsNanToZero) {
  Tensor t = Tensor::FromVector(
                 std::vector<double>{std::nan(""), 1e300, -1e300, 3e9, -3.9})
                 .value();
  EXPECT_THAT(t.To(DType::kI32).value().ToVector<int32_t>().value(),
              ElementsAre(0, std::numeric_limits<int32_t>::max(),
                          std::numeric_limits<int32_t>::min(),
                          std::numeric_limits<int32_t>::max(), -3));
  EXPECT_THAT(
      t.To(DType::kI64).value().ToVector<int64_t>().value(),
      ElementsAre(0, std::numeric_limits<int64_t>::max(),
                  std::numeric_limits<int64_t>::min(), 3000000000LL, -3));
}

TEST(TensorTest, CopyFromWritesInPlaceThroughViews) {
  Tensor flat = Tensor::Zeros({6}).value();
  Tensor v = flat.View(2, {2, 2}).value();
  Tensor src =
      Tensor::FromVector(std::vector<float>{1, 2, 3, 4}, {2, 2}).value();
  ASSERT_TRUE(v.CopyFrom(src).ok());
  EXPECT_THAT(flat.ToVector<float>().value(), ElementsAre(0, 0, 1, 2, 3, 4));

  absl::Status s = v.CopyFrom(Tensor::Zeros({4}).value());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("[2, 2]"));
  EXPECT_THAT(s.message(), HasSubstr("[4]"));
  s = v.CopyFrom(Tensor::Zeros({2, 2}, DType::kF64).value());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("f64"));
}

TEST(TensorTest, ToString) {
  Tensor t =
      Tensor::FromVector(std::vector<float>{1, 2.5, 3, 4}, {2, 2}).value();
  EXPECT_EQ(t.ToString(),
            "Tensor(shape=[2, 2], dtype=f32, device=cpu, "
            "data=[[1, 2.5], [3, 4]])");
  Tensor s = Tensor::Scalar(3, DType::kI64).value();
  EXPECT_EQ(s.ToString(), "Tensor(shape=[], dtype=i64, device=cpu, data=3)");
  Tensor big = Tensor::Zeros({10}).value();
  EXPECT_THAT(big.ToString(), HasSubstr("[0, 0, 0, ..., 0, 0, 0]"));
  ASSERT_TRUE(t.set_requires_grad(true).ok());
  Tensor y = Mul(t, 2.0).value();
  EXPECT_THAT(y.ToString(), HasSubstr("grad_fn=MulScalar"));
}

TEST(DTypeTest, Properties) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kI64), 8);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_STREQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_TRUE(IsFloatingPoint(DType::kF16));
  EXPECT_FALSE(IsFloatingPoint(DType::kI32));
  EXPECT_EQ(DTypeOf<double>::value, DType::kF64);
}

TEST(DeviceTest, Basics) {
  EXPECT_EQ(Device::CPU().ToString(), "cpu");
  EXPECT_EQ(Device::CUDA(3).ToString(), "cuda:3");
  EXPECT_TRUE(Device() == Device::CPU());
  EXPECT_TRUE(Device::CUDA(0) != Device::CUDA(1));
  EXPECT_TRUE(Device::CUDA(1).is_cuda());
}

}  // namespace
}  // namespace tandem
