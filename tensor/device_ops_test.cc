// Device dispatch of tensor/ops.h, without a GPU: a host-backed fake
// "CUDA" device (tensor/fake_device.h) records which DeviceOps method each
// op reached. The CUDA kernels themselves are tested in tensor/cuda/.
#include "tensor/device_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensor/fake_device.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Device kDev = Device::CUDA(0);

Tensor OnDevice(std::vector<float> v, Shape shape) {
  Tensor cpu = Tensor::FromVector(v, std::move(shape)).value();
  return cpu.To(kDev).value();
}

// Runs `op`, expects the fake's "not implemented" naming `method`, and that
// `method` was the fake's last call.
template <typename Op>
void ExpectDispatch(Op op, const std::string& method) {
  FakeDeviceOps& fake = *FakeDevice::Install().ops;
  fake.calls.clear();
  absl::Status s = op();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << method << ": " << s;
  EXPECT_THAT(s.message(), HasSubstr("fake device: " + method));
  ASSERT_FALSE(fake.calls.empty()) << method;
  EXPECT_EQ(fake.calls.back(), method);
}

TEST(DeviceOpsTest, RegistryErrors) {
  const FakeDevice& fake = FakeDevice::Install();
  // Before anything was registered: a clear error naming the fix.
  EXPECT_EQ(fake.before_install.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(fake.before_install.message(), HasSubstr("cuda:0"));
  EXPECT_THAT(fake.before_install.message(), HasSubstr("//tensor/cuda"));
  EXPECT_FALSE(RegisterDeviceOps(DeviceType::kCUDA, nullptr).ok());
  EXPECT_FALSE(RegisterDeviceOps(DeviceType::kCPU, fake.ops).ok());
  EXPECT_FALSE(GetDeviceOps(Device::CPU()).ok());
  EXPECT_EQ(GetDeviceOps(kDev).value(), fake.ops.get());
  // All-CPU inputs never reach the device ops.
  Tensor a = Tensor::Ones({2}).value();
  EXPECT_EQ(internal::DeviceOpsFor({a, Tensor()}).value(), nullptr);
  EXPECT_EQ(internal::DeviceOpsFor({a, OnDevice({1}, {1})}).value(),
            fake.ops.get());
}

TEST(DeviceOpsTest, EveryOpDispatchesOnTheDevice) {
  FakeDevice::Install();
  Tensor m = OnDevice({1, 2, 3, 4}, {2, 2});
  Tensor v = OnDevice({1, 2}, {2});
  Tensor img = OnDevice(std::vector<float>(16, 1.f), {1, 1, 4, 4});
  Tensor w = OnDevice(std::vector<float>(4, 1.f), {1, 1, 2, 2});
  Tensor labels =
      Tensor::FromVector(std::vector<int64_t>{0, 1}).value().To(kDev).value();
  Tensor cpu = Tensor::Ones({2, 2}).value();

  ExpectDispatch([&] { return MatMul(m, m).status(); }, "MatMul");
  ExpectDispatch([&] { return Linear(m, m, v).status(); }, "Linear");
  ExpectDispatch([&] { return Add(m, v).status(); }, "Binary");
  ExpectDispatch([&] { return Sub(m, m).status(); }, "Binary");
  ExpectDispatch([&] { return Mul(m, m).status(); }, "Binary");
  ExpectDispatch([&] { return Div(m, m).status(); }, "Binary");
  // A CPU operand next to a device one goes to the device ops, which
  // report the mismatch.
  ExpectDispatch([&] { return Add(cpu, m).status(); }, "Binary");
  ExpectDispatch([&] { return Add(m, 1.0).status(); }, "Unary");
  ExpectDispatch([&] { return Sub(m, 1.0).status(); }, "Unary");
  ExpectDispatch([&] { return Mul(m, 2.0).status(); }, "Unary");
  ExpectDispatch([&] { return Div(m, 2.0).status(); }, "Unary");
  ExpectDispatch([&] { return Neg(m).status(); }, "Unary");
  ExpectDispatch([&] { return Relu(m).status(); }, "Unary");
  ExpectDispatch([&] { return Sigmoid(m).status(); }, "Unary");
  ExpectDispatch([&] { return Tanh(m).status(); }, "Unary");
  ExpectDispatch([&] { return Exp(m).status(); }, "Unary");
  ExpectDispatch([&] { return Log(m).status(); }, "Unary");
  ExpectDispatch([&] { return Softmax(m).status(); }, "Softmax");
  ExpectDispatch([&] { return LogSoftmax(m, 0).status(); }, "Softmax");
  ExpectDispatch([&] { return Sum(m).status(); }, "SumAll");
  ExpectDispatch([&] { return Mean(m).status(); }, "SumAll");
  ExpectDispatch([&] { return Sum(m, 1).status(); }, "SumDim");
  ExpectDispatch([&] { return Mean(m, 0, true).status(); }, "SumDim");
  ExpectDispatch([&] { return Argmax(m).status(); }, "Argmax");
  ExpectDispatch([&] { return Conv2d(img, w, Tensor()).status(); }, "Conv2d");
  ExpectDispatch([&] { return MaxPool2d(img).status(); }, "MaxPool2d");
  ExpectDispatch([&] { return CrossEntropy(m, labels).status(); },
                 "CrossEntropy");
  ExpectDispatch([&] { return Mse(m, m).status(); }, "Mse");
}

TEST(DeviceOpsTest, TensorMethodsUseTheDeviceKernels) {
  FakeDeviceOps& fake = *FakeDevice::Install().ops;
  fake.calls.clear();
  Tensor t = Tensor::Full({3}, 2.5, DType::kF32, kDev).value();
  EXPECT_THAT(fake.calls, ElementsAre("FillInPlace"));
  EXPECT_EQ(t.device(), kDev);
  // Item() on a device copies the element to the host.
  Tensor one = Tensor::Full({1}, 7.0, DType::kF64, kDev).value();
  EXPECT_EQ(one.Item().value(), 7.0);
  // To(DType) and Clone() convert on the device.
  fake.calls.clear();
  Tensor h = t.To(DType::kF16).value();
  Tensor c = t.Clone().value();
  EXPECT_THAT(fake.calls, ElementsAre("Convert", "Convert"));
  EXPECT_EQ(h.device(), kDev);
  EXPECT_EQ(h.dtype(), DType::kF16);
  Tensor back = h.To(DType::kF32).value().To(Device::CPU()).value();
  EXPECT_THAT(back.ToVector<float>().value(), ElementsAre(2.5f, 2.5f, 2.5f));
  // CopyFrom between the host and the device, both ways.
  Tensor host = Tensor::FromVector(std::vector<float>{1, 2, 3}).value();
  ASSERT_TRUE(t.CopyFrom(host).ok());
  Tensor host2 = Tensor::Zeros({3}).value();
  ASSERT_TRUE(host2.CopyFrom(t).ok());
  EXPECT_THAT(host2.ToVector<float>().value(), ElementsAre(1, 2, 3));
  // In-place ops and zero_grad.
  fake.calls.clear();
  ASSERT_TRUE(AddInPlace(t, t).ok());
  ASSERT_TRUE(ScaleInPlace(t, 2).ok());
  ASSERT_TRUE(FillInPlace(t, 0).ok());
  EXPECT_THAT(fake.calls,
              ElementsAre("AddInPlace", "ScaleInPlace", "FillInPlace"));
}

TEST(DeviceOpsTest, BackwardSeedsOnTheDevice) {
  FakeDeviceOps& fake = *FakeDevice::Install().ops;
  Tensor x = Tensor::Zeros({1}, DType::kF32, kDev).value();
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  fake.calls.clear();
  // A leaf's own backward: the seed (ones) is made on the device.
  ASSERT_TRUE(x.Backward().ok());
  EXPECT_THAT(fake.calls, ElementsAre("FillInPlace"));
  ASSERT_TRUE(x.has_grad());
  EXPECT_EQ(x.grad().device(), kDev);
  EXPECT_EQ(x.grad().Item().value(), 1.0);
  fake.calls.clear();
  x.ZeroGrad();
  EXPECT_THAT(fake.calls, ElementsAre("FillInPlace"));
  EXPECT_EQ(x.grad().Item().value(), 0.0);
}

}  // namespace
}  // namespace tandem
