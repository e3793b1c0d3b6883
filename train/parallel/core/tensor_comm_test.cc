#include "train/parallel/core/tensor_comm.h"

#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "base/dtype.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "tensor/testing/fake_device.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// tensor and comm once numbered i32 and i64 in opposite orders, so a cast
// from a tensor's dtype to comm's swapped the two widths: an i32 tensor went
// out as a view of 8-byte elements, twice its bytes. One enum now; the cast
// every engine effectively does keeps each width.
TEST(ToBufferViewTest, ACastKeepsEveryTensorDTypesWidth) {
  static_assert(std::is_same_v<comm::DType, DType>);
  const DType all[] = {DType::kF32,  DType::kF64, DType::kF16,
                       DType::kBF16, DType::kI64, DType::kI32};
  for (DType d : all) {
    SCOPED_TRACE(DTypeName(d));
    const comm::DType cast = static_cast<comm::DType>(static_cast<int8_t>(d));
    EXPECT_EQ(comm::DTypeSize(cast), DTypeSize(d)) << DTypeName(d);
    EXPECT_STREQ(comm::DTypeName(cast), DTypeName(d));
    Tensor t = Tensor::Zeros({3}, d).value();
    absl::StatusOr<comm::BufferView> v = ToBufferView(t);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->dtype, d);
    EXPECT_EQ(v->bytes(), t.nbytes()) << DTypeName(d);
  }
}

TEST(ToBufferViewTest, CpuTensorIsAHostViewOfTheWholeTensor) {
  Tensor t = Tensor::Zeros({2, 3}, DType::kF64).value();
  absl::StatusOr<comm::BufferView> v = ToBufferView(t);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data, t.raw_data());
  EXPECT_EQ(v->count, 6);
  EXPECT_EQ(v->dtype, comm::DType::kF64);
  EXPECT_EQ(v->space, comm::MemorySpace::kHost);
  EXPECT_EQ(v->device, -1);
  EXPECT_EQ(v->bytes(), t.nbytes());
}

TEST(ToBufferViewTest, ViewIntoAFlatBufferCoversOnlyItsSlice) {
  Tensor flat = Tensor::Zeros({10}, DType::kBF16).value();
  Tensor slice = flat.View(4, {2, 3}).value();
  absl::StatusOr<comm::BufferView> v = ToBufferView(slice);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data, static_cast<char*>(flat.raw_data()) + 4 * 2);
  EXPECT_EQ(v->count, 6);
  EXPECT_EQ(v->dtype, comm::DType::kBF16);
}

TEST(ToBufferViewTest, CudaTensorIsACudaViewOfItsDevice) {
  FakeDevice::Install();  // host-backed "CUDA" memory
  Tensor t = Tensor::Zeros({5}, DType::kI32, Device::CUDA(3)).value();
  absl::StatusOr<comm::BufferView> v = ToBufferView(t);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->data, t.raw_data());
  EXPECT_EQ(v->count, 5);
  EXPECT_EQ(v->dtype, comm::DType::kI32);
  EXPECT_EQ(v->space, comm::MemorySpace::kCuda);
  EXPECT_EQ(v->device, 3);
}

TEST(ToBufferViewTest, NegativeCudaOrdinalIsAnErrorNamingTheDevice) {
  FakeDevice::Install();
  absl::StatusOr<Tensor> t = Tensor::Zeros({1}, DType::kF32, Device::CUDA(-1));
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<comm::BufferView> v = ToBufferView(*t);
  ASSERT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("got one on cuda:-1"));
  EXPECT_THAT(v.status().message(), HasSubstr("expected a tensor on the CPU"));
}

TEST(ToBufferViewTest, UndefinedTensorIsAnError) {
  absl::StatusOr<comm::BufferView> v = ToBufferView(Tensor());
  ASSERT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(),
              HasSubstr("expected a defined tensor, got an undefined one"));
}

TEST(ToBufferViewTest, EmptyTensorIsAnEmptyView) {
  Tensor t = Tensor::Zeros({0}).value();
  absl::StatusOr<comm::BufferView> v = ToBufferView(t);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->count, 0);
  EXPECT_EQ(v->dtype, comm::DType::kF32);
}

}  // namespace
}  // namespace tandem::train
