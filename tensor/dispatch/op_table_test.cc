// The kernel table (tensor/dispatch/op_table.h) and device dispatch of
// tensor/ops.h, without a GPU: a host-backed fake "CUDA" device
// (tensor/testing/fake_device.h) records which kernel row each op reached. The
// CUDA kernels themselves are tested in tensor/cuda/.
#include "tensor/dispatch/op_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tensor/dispatch/op_kernels.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/fake_device.h"

namespace tandem {
namespace {

using ::testing::Contains;
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
  FakeKernels& fake = *FakeDevice::Install().kernels;
  fake.ClearCalls();
  absl::Status s = op();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << method << ": " << s;
  EXPECT_THAT(s.message(), HasSubstr("fake device: " + method));
  ASSERT_FALSE(fake.calls().empty()) << method;
  EXPECT_EQ(fake.calls().back(), method);
}

absl::Status Twice(const Tensor&, absl::Span<const Tensor>, double) {
  return absl::OkStatus();
}
absl::Status Thrice(const Tensor&, absl::Span<const Tensor>, double) {
  return absl::OkStatus();
}
using OtherKernel = absl::Status(const Tensor&);
absl::Status Other(const Tensor&) { return absl::OkStatus(); }

TEST(OpTableTest, RegistryErrors) {
  const FakeDevice& fake = FakeDevice::Install();
  // Before anything was registered: a clear error naming the fix.
  EXPECT_EQ(fake.before_install.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(fake.before_install.message(), HasSubstr("cuda:0"));
  EXPECT_THAT(fake.before_install.message(), HasSubstr("//tensor/cuda"));
  EXPECT_THAT(fake.before_install.message(), HasSubstr("MatMul"));
  // The built-in rows have CPU kernels, registered next to the CPU code.
  EXPECT_TRUE(MatMulKernels().For(Device::CPU()).ok());
  // A second signature for a row is refused at registration and lookup.
  const OpKernels<OtherKernel> clash(internal::OpRowKey{"MatMul"});
  absl::Status s = clash.Register(DeviceType::kCUDA, Other);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("two kernel signatures"));
  EXPECT_EQ(clash.For(Device::CPU()).status().code(),
            absl::StatusCode::kInternal);
  // ...and leaves the real row alone.
  EXPECT_THAT(*MatMulKernels().For(kDev), ::testing::NotNull());
}

TEST(OpTableTest, MissingKernelNamesTheOpAndTheDevice) {
  FakeDevice::Install();  // CUDA has kernels, but none for this op
  const OpKernels<PointwiseKernel> op(internal::OpRowKey{"TestOnlyPointwise"});
  ASSERT_TRUE(op.Register(DeviceType::kCPU, Twice).ok());
  absl::StatusOr<PointwiseKernel*> k = op.For(Device::CUDA(0));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(k.status().message(), HasSubstr("op TestOnlyPointwise"));
  EXPECT_THAT(k.status().message(), HasSubstr("cuda:0"));
  EXPECT_THAT(k.status().message(), HasSubstr("kernels for: cpu"));
  // A device type without any kernel says how to get them.
  absl::StatusOr<PointwiseKernel*> sim = op.For(Device::Sim(1));
  EXPECT_EQ(sim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sim.status().message(), HasSubstr("sim:1"));
  EXPECT_THAT(sim.status().message(), HasSubstr("InstallSimDevices"));
  // Registered later: found by the same handle and by a new one.
  ASSERT_TRUE(op.Register(DeviceType::kCUDA, Twice).ok());
  EXPECT_EQ(*op.For(Device::CUDA(3)), &Twice);
  EXPECT_EQ(*OpKernels<PointwiseKernel>(internal::OpRowKey{"TestOnlyPointwise"})
                 .For(kDev),
            &Twice);
  EXPECT_THAT(internal::DescribeKernelTable(),
              Contains("TestOnlyPointwise: cpu cuda"));
  // Null removes it again.
  ASSERT_TRUE(op.Register(DeviceType::kCUDA, nullptr).ok());
  EXPECT_FALSE(op.For(kDev).ok());
}

// Registration races with lookups: every lookup sees one of the kernels
// (never a torn or missing one) and the table stays consistent.
TEST(OpTableTest, RegistrationIsThreadSafe) {
  const OpKernels<PointwiseKernel> op(internal::OpRowKey{"TestOnlyRacing"});
  ASSERT_TRUE(op.Register(DeviceType::kCPU, Twice).ok());
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        if (t % 2 == 0) {
          if (!op.Register(DeviceType::kCPU, i % 2 ? Twice : Thrice).ok()) {
            bad = true;
          }
          // Rows found by name from many threads are one row.
          OpKernels<PointwiseKernel> again(
              internal::OpRowKey{"TestOnlyRacing"});
          if (!again.For(Device::CPU()).ok()) bad = true;
        } else {
          absl::StatusOr<PointwiseKernel*> k = op.For(Device::CPU());
          if (!k.ok() || (*k != &Twice && *k != &Thrice)) bad = true;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(bad);
}

TEST(DispatchTest, EveryOpDispatchesOnTheDevice) {
  FakeKernels& fake = *FakeDevice::Install().kernels;
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
  // A CPU operand next to a device one: the op's one check reports the
  // mismatch before any kernel runs.
  fake.ClearCalls();
  absl::Status mixed = Add(cpu, m).status();
  EXPECT_EQ(mixed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.message(), HasSubstr("cpu and cuda:0 (in Add)"));
  EXPECT_TRUE(fake.calls().empty());
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
  ExpectDispatch([&] { return MaxPool2d(img).status(); }, "Pool2d");
  ExpectDispatch([&] { return AvgPool2d(img).status(); }, "Pool2d");
  ExpectDispatch(
      [&] {
        return AdaptiveAvgPool2d(img, {1, 1}).status();
      },
      "Pool2d");
  ExpectDispatch([&] { return CrossEntropy(m, labels).status(); },
                 "CrossEntropy");
  ExpectDispatch([&] { return Mse(m, m).status(); }, "Mse");
}

// Gelu has CPU and CUDA kernels, but the fake device registers only the
// built-in rows: the op names itself and the device.
TEST(DispatchTest, AnOpWithoutAKernelOnTheDeviceSaysSo) {
  FakeDevice::Install();
  absl::StatusOr<Tensor> y = Gelu(OnDevice({1, 2}, {2}));
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(y.status().message(),
              HasSubstr("op Gelu has no kernel for cuda:0"));
  EXPECT_THAT(y.status().message(), HasSubstr("kernels for: cpu"));
}

// An op's backward formula lives in its definition and calls the backward
// row of the inputs' device: a device with the forward kernel but not the
// backward one fails Backward with an error naming that row and the device.
absl::Status HostNeg(UnaryOp, const Tensor& x, double, const Tensor& y) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    y.data<float>()[i] = -x.data<float>()[i];
  }
  return absl::OkStatus();
}

TEST(DispatchTest, AMissingBackwardKernelNamesTheRowAndTheDevice) {
  FakeDevice::Install();
  UnaryKernel* fake_unary = UnaryKernels().For(kDev).value();
  ASSERT_TRUE(UnaryKernels().Register(DeviceType::kCUDA, HostNeg).ok());
  Tensor x = OnDevice({1, 2}, {2});
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  absl::StatusOr<Tensor> y = Neg(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(y->To(Device::CPU()).value().ToVector<float>().value(),
              ElementsAre(-1.f, -2.f));
  absl::Status s = y->Backward(OnDevice({1, 1}, {2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("op UnaryBackward has no kernel for cuda:0"));
  EXPECT_THAT(s.message(), HasSubstr("kernels for: cpu"));
  ASSERT_TRUE(UnaryKernels().Register(DeviceType::kCUDA, fake_unary).ok());
}

TEST(DispatchTest, TensorMethodsUseTheDeviceKernels) {
  FakeKernels& fake = *FakeDevice::Install().kernels;
  fake.ClearCalls();
  Tensor t = Tensor::Full({3}, 2.5, DType::kF32, kDev).value();
  EXPECT_THAT(fake.calls(), ElementsAre("FillInPlace"));
  EXPECT_EQ(t.device(), kDev);
  // Item() on a device copies the element to the host.
  Tensor one = Tensor::Full({1}, 7.0, DType::kF64, kDev).value();
  EXPECT_EQ(one.Item().value(), 7.0);
  // To(DType) and Clone() convert on the device.
  fake.ClearCalls();
  Tensor h = t.To(DType::kF16).value();
  Tensor c = t.Clone().value();
  EXPECT_THAT(fake.calls(), ElementsAre("Convert", "Convert"));
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
  fake.ClearCalls();
  ASSERT_TRUE(AddInPlace(t, t).ok());
  ASSERT_TRUE(ScaleInPlace(t, 2).ok());
  ASSERT_TRUE(FillInPlace(t, 0).ok());
  EXPECT_THAT(fake.calls(),
              ElementsAre("AddInPlace", "ScaleInPlace", "FillInPlace"));
}

TEST(DispatchTest, BackwardSeedsOnTheDevice) {
  FakeKernels& fake = *FakeDevice::Install().kernels;
  Tensor x = Tensor::Zeros({1}, DType::kF32, kDev).value();
  ASSERT_TRUE(x.set_requires_grad(true).ok());
  fake.ClearCalls();
  // A leaf's own backward: the seed (ones) is made on the device.
  ASSERT_TRUE(x.Backward().ok());
  EXPECT_THAT(fake.calls(), ElementsAre("FillInPlace"));
  ASSERT_TRUE(x.has_grad());
  EXPECT_EQ(x.grad().device(), kDev);
  EXPECT_EQ(x.grad().Item().value(), 1.0);
  fake.ClearCalls();
  x.ZeroGrad();
  EXPECT_THAT(fake.calls(), ElementsAre("FillInPlace"));
  EXPECT_EQ(x.grad().Item().value(), 0.0);
}

}  // namespace
}  // namespace tandem
