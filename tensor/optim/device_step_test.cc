// Sgd and AdamW on device parameters, without a GPU: the host-backed fake
// device (tensor/testing/fake_device.h) receives the fused step with the
// scalars the CPU update would use. The real kernels are compared with the CPU
// in tensor/cuda/training_cuda_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tensor/optim/adamw.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "tensor/testing/fake_device.h"

namespace tandem::optim {
namespace {

using ::testing::ElementsAre;

const Device kDev = Device::CUDA(0);

Tensor Param() {
  Tensor p = Tensor::Full({4}, 1.0, DType::kF32, kDev).value();
  EXPECT_TRUE(p.set_requires_grad(true).ok());
  EXPECT_TRUE(
      p.set_grad(Tensor::Full({4}, 0.5, DType::kF32, kDev).value()).ok());
  return p;
}

TEST(DeviceStepTest, SgdCallsTheFusedStep) {
  FakeKernels& fake = *FakeDevice::Install().kernels;
  Tensor p = Param();
  SgdOptions o;
  o.momentum = 0.9;
  o.dampening = 0.1;
  o.weight_decay = 0.01;
  o.maximize = true;
  Sgd sgd = Sgd::Create({p}, 0.05, o).value();
  fake.ClearCalls();
  ASSERT_TRUE(sgd.Step().ok());
  EXPECT_THAT(fake.calls(), ElementsAre("SgdStep"));
  EXPECT_TRUE(fake.last_sgd().first);
  EXPECT_EQ(fake.last_sgd().lr, 0.05);
  EXPECT_EQ(fake.last_sgd().momentum, 0.9);
  EXPECT_EQ(fake.last_sgd().dampening, 0.1);
  EXPECT_EQ(fake.last_sgd().weight_decay, 0.01);
  EXPECT_TRUE(fake.last_sgd().maximize);
  // The momentum buffer lives on the parameter's device.
  EXPECT_EQ(sgd.momentum_buffer(0).device(), kDev);
  ASSERT_TRUE(sgd.Step().ok());
  EXPECT_FALSE(fake.last_sgd().first);
}

TEST(DeviceStepTest, AdamWCallsTheFusedStep) {
  FakeKernels& fake = *FakeDevice::Install().kernels;
  Tensor p = Param();
  AdamWOptions o;
  o.lr = 0.01;
  o.amsgrad = true;
  AdamW adam = AdamW::Create({p}, o).value();
  ASSERT_TRUE(adam.Step().ok());
  ASSERT_TRUE(adam.Step().ok());
  EXPECT_EQ(fake.calls().back(), "AdamWStep");
  EXPECT_EQ(adam.exp_avg(0).device(), kDev);
  EXPECT_EQ(adam.exp_avg_sq(0).device(), kDev);
  // Step 2's scalars, computed on the host as the CPU update does.
  EXPECT_EQ(fake.last_adamw().step_size, 0.01 / (1 - std::pow(0.9, 2.0)));
  EXPECT_EQ(fake.last_adamw().bias2_sqrt, std::sqrt(1 - std::pow(0.999, 2.0)));
  EXPECT_EQ(fake.last_adamw().decay, 1 - 0.01 * 0.01);
  EXPECT_TRUE(fake.last_adamw().amsgrad);
}

TEST(DeviceStepTest, GradientOnAnotherDeviceIsAnError) {
  FakeDevice::Install();
  Tensor p = Tensor::Full({4}, 1.0, DType::kF32, kDev).value();
  ASSERT_TRUE(p.set_requires_grad(true).ok());
  Sgd sgd = Sgd::Create({p}, 0.1).value();
  // set_grad refuses a gradient on another device...
  EXPECT_FALSE(p.set_grad(Tensor::Ones({4}).value()).ok());
  // ...so none is installed and Step skips the parameter.
  EXPECT_TRUE(sgd.Step().ok());
}

}  // namespace
}  // namespace tandem::optim
