#include "tensor/sim_device/sim_device.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/batch_norm.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

class SimDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_NN_ASSERT_OK(InstallSimDevices(3));
    ResetSimCopyCounters();
  }
};

TEST(SimDeviceNameTest, IsADeviceOfItsOwn) {
  EXPECT_EQ(Device::Sim(2).ToString(), "sim:2");
  EXPECT_TRUE(Device::Sim(0).is_sim());
  EXPECT_FALSE(Device::Sim(0).is_cpu());
  EXPECT_NE(Device::Sim(1), Device::CUDA(1));
  EXPECT_NE(Device::Sim(0), Device::CPU());
}

TEST_F(SimDeviceTest, CountIsEnforced) {
  EXPECT_EQ(SimDeviceCount(), 3);
  TANDEM_NN_ASSERT_OK(Tensor::Zeros({2}, DType::kF32, Device::Sim(2)).status());
  absl::StatusOr<Tensor> missing =
      Tensor::Zeros({2}, DType::kF32, Device::Sim(3));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("sim:3 does not exist"),
            std::string::npos)
      << missing.status();
  EXPECT_NE(missing.status().message().find("3 simulated device"),
            std::string::npos)
      << missing.status();
}

TEST_F(SimDeviceTest, BadCountsAreRefused) {
  EXPECT_EQ(InstallSimDevices(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InstallSimDevices(5000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimDeviceCount(), 3);
}

TEST_F(SimDeviceTest, CountFromEnvironment) {
  ::unsetenv(kSimDevicesEnv);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(int64_t n, SimDeviceCountFromEnv(2));
  EXPECT_EQ(n, 2);
  ::setenv(kSimDevicesEnv, "4", 1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(n, SimDeviceCountFromEnv(2));
  EXPECT_EQ(n, 4);
  ::setenv(kSimDevicesEnv, "four", 1);
  absl::StatusOr<int64_t> bad = SimDeviceCountFromEnv(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TANDEM_SIM_DEVICES=four"),
            std::string::npos)
      << bad.status();
  ::unsetenv(kSimDevicesEnv);
}

TEST_F(SimDeviceTest, MixingDevicesNamesBoth) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor a, Tensor::Ones({2}, DType::kF32, Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor b, Tensor::Ones({2}, DType::kF32, Device::Sim(1)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor c, Tensor::Ones({2}));
  for (const auto& [x, y, first, second] :
       std::vector<std::tuple<Tensor, Tensor, const char*, const char*>>{
           {a, b, "sim:0", "sim:1"}, {c, a, "cpu", "sim:0"}}) {
    absl::StatusOr<Tensor> sum = Add(x, y);
    ASSERT_FALSE(sum.ok());
    EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string expected =
        std::string(
            "Expected all tensors to be on the same device, but found "
            "at least two devices, ") +
        first + " and " + second;
    EXPECT_NE(sum.status().message().find(expected), std::string::npos)
        << sum.status();
  }
  EXPECT_FALSE(AddInPlace(a, b).ok());
}

TEST_F(SimDeviceTest, CopiesAreCountedPerDevicePair) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor host,
                                 Tensor::FromVector<float>({1, 2, 3, 4}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor on0, host.To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor on1, on0.To(Device::Sim(1)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor back, on1.To(Device::CPU()));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> values,
                                 back.ToVector<float>());
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(on1.device(), Device::Sim(1));
  EXPECT_EQ(SimCopiedBytes(Device::CPU(), Device::Sim(0)), 16);
  EXPECT_EQ(SimCopiedBytes(Device::Sim(0), Device::Sim(1)), 16);
  EXPECT_EQ(SimCopiedBytes(Device::Sim(1), Device::CPU()), 16);
  EXPECT_EQ(SimCopiedBytes(Device::Sim(1), Device::Sim(0)), 0);
  const std::vector<SimCopyCount> all = SimCopyCounters();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].from, Device::CPU());
  EXPECT_EQ(all[0].copies, 1);
  ResetSimCopyCounters();
  EXPECT_TRUE(SimCopyCounters().empty());
}

// Forward, backward and an Sgd step on sim:1 give the CPU's values bit for
// bit, and every result and gradient stays on sim:1.
TEST_F(SimDeviceTest, TrainingMatchesTheCpuExactly) {
  std::vector<std::unique_ptr<nn::Sequential>> models;
  for (int i = 0; i < 2; ++i) {
    Generator gen(7);
    auto m = std::make_unique<nn::Sequential>();
    TANDEM_NN_ASSERT_OK(m->Append(nn::Linear::Create(5, 8, gen)));
    TANDEM_NN_ASSERT_OK(m->Append(std::make_unique<nn::ReLU>()));
    TANDEM_NN_ASSERT_OK(m->Append(nn::Linear::Create(8, 3, gen)));
    models.push_back(std::move(m));
  }
  TANDEM_NN_ASSERT_OK(models[1]->To(Device::Sim(1)));
  std::vector<float> xv(20), tv(12);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * i - 0.7f;
  for (size_t i = 0; i < tv.size(); ++i) tv[i] = 0.05f * i;
  std::vector<optim::Sgd> opts;
  for (auto& m : models) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        optim::Sgd o, optim::Sgd::Create(m->Parameters(), 0.1,
                                         optim::SgdOptions{.momentum = 0.9}));
    opts.push_back(std::move(o));
  }
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 2; ++i) {
      const Device d = i == 0 ? Device::CPU() : Device::Sim(1);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::FromVector(xv, {4, 5}));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::FromVector(tv, {4, 3}));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, x.To(d));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(t, t.To(d));
      models[i]->ZeroGrad();
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, models[i]->Forward(x));
      EXPECT_EQ(y.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Mse(y, t));
      TANDEM_NN_ASSERT_OK(loss.Backward());
      TANDEM_NN_ASSERT_OK(opts[i].Step());
    }
  }
  const std::vector<Tensor> cpu = models[0]->Parameters();
  const std::vector<Tensor> sim = models[1]->Parameters();
  ASSERT_EQ(cpu.size(), sim.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(sim[i].device(), Device::Sim(1));
    EXPECT_EQ(sim[i].grad().device(), Device::Sim(1));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor s, sim[i].To(Device::CPU()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> a,
                                   cpu[i].ToVector<float>());
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> b, s.ToVector<float>());
    EXPECT_EQ(a, b) << "parameter " << i;
  }
}

// A pointwise op written on the kernel table (Gelu, its backward another
// op) runs on a simulated device through the one adapter (ViaCpu):
// values and gradients bit for bit the CPU's, on the simulated device.
TEST_F(SimDeviceTest, PointwiseTableOpsMatchTheCpuExactly) {
  std::vector<float> xv(37);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.17f * i - 3.1f;
  for (GeluApproximation a :
       {GeluApproximation::kNone, GeluApproximation::kTanh}) {
    std::vector<std::vector<float>> values, grads;
    for (const Device d : {Device::CPU(), Device::Sim(2)}) {
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::FromVector(xv, {37}));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, x.To(d));
      TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, Gelu(x, a));
      EXPECT_EQ(y.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(Mul(y, y).value()));
      TANDEM_NN_ASSERT_OK(loss.Backward());
      EXPECT_EQ(x.grad().device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor hy, y.To(Device::CPU()));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor hg, x.grad().To(Device::CPU()));
      values.push_back(hy.ToVector<float>().value());
      grads.push_back(hg.ToVector<float>().value());
    }
    EXPECT_EQ(values[0], values[1]);
    EXPECT_EQ(grads[0], grads[1]);
  }
}

// The built-in ops (Conv2d, the elementwise ops, Sum/Mean, Softmax,
// MatMul, Linear, CrossEntropy, Mse) on a simulated device: each op's one
// definition records the autograd node and calls the sim's rows (the CPU
// kernels on host views), so values and gradients are the CPU's, bit for
// bit, and stay on the simulated device.
TEST_F(SimDeviceTest, BuiltInOpsMatchTheCpuExactly) {
  std::vector<float> xv(2 * 3 * 5 * 5), wv(4 * 3 * 3 * 3), bv(4), mv(4 * 4);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.05f * ((i * 7) % 23) - 0.5f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.03f * ((i * 5) % 13) - 0.2f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = 0.1f * i - 0.15f;
  for (size_t i = 0; i < mv.size(); ++i) mv[i] = 0.07f * ((i * 3) % 7) - 0.2f;
  std::vector<std::vector<float>> results[2];
  for (int r = 0; r < 2; ++r) {
    const Device d = r == 0 ? Device::CPU() : Device::Sim(2);
    auto make = [&](const std::vector<float>& v, Shape shape) {
      Tensor t = Tensor::FromVector(v, std::move(shape)).value().To(d).value();
      EXPECT_TRUE(t.set_requires_grad(true).ok());
      return t;
    };
    Tensor x = make(xv, {2, 3, 5, 5});
    Tensor w = make(wv, {4, 3, 3, 3});
    Tensor b = make(bv, {4});
    Tensor m = make(mv, {4, 4});
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        Tensor labels,
        Tensor::FromVector(std::vector<int64_t>{1, 3}).value().To(d));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y,
                                   Conv2d(x, w, b, {.padding = {1, 1}}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor h, Tanh(y));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(h, Mean(h, 3));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(h, Sum(h, 2));  // [2, 4]
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(h, Div(Sub(h, b).value(), 3.0));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor logits, MatMul(h, m, false, true));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(logits, Linear(logits, m, b));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor ce, CrossEntropy(logits, labels));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor p, Softmax(logits, 1));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor mse, Mse(p, Exp(h).value()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Add(ce, mse));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(loss, Mul(loss, loss));
    TANDEM_NN_ASSERT_OK(loss.Backward());
    for (const Tensor& t :
         {y, logits, loss, x.grad(), w.grad(), b.grad(), m.grad()}) {
      EXPECT_EQ(t.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor host, t.To(Device::CPU()));
      results[r].push_back(host.ToVector<float>().value());
    }
  }
  EXPECT_EQ(results[0], results[1]);
}

// BatchNorm2d (norm) on a simulated device: the CPU kernels on host
// views, so outputs, gradients and running statistics are the CPU's, bit
// for bit, in training and in eval.
TEST_F(SimDeviceTest, BatchNormMatchesTheCpuExactly) {
  std::vector<std::unique_ptr<nn::BatchNorm2d>> bns;
  for (int i = 0; i < 2; ++i) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto bn, nn::BatchNorm2d::Create(3));
    bns.push_back(std::move(bn));
  }
  TANDEM_NN_ASSERT_OK(bns[1]->To(Device::Sim(1)));
  std::vector<float> xv(36);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * ((i * 7) % 11) - 0.3f;
  std::vector<std::vector<float>> results[2];
  for (int i = 0; i < 2; ++i) {
    const Device d = i == 0 ? Device::CPU() : Device::Sim(1);
    for (bool training : {true, true, false}) {
      bns[i]->Train(training);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x,
                                     Tensor::FromVector(xv, {3, 3, 2, 2}));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, x.To(d));
      TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
      bns[i]->ZeroGrad();
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, bns[i]->Forward(x));
      EXPECT_EQ(y.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y2, Mul(y, y));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(y2));
      TANDEM_NN_ASSERT_OK(loss.Backward());
      for (const Tensor& t : {y, x.grad(), bns[i]->weight().grad(),
                              bns[i]->running_mean(), bns[i]->running_var()}) {
        EXPECT_EQ(t.device(), d);
        TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor h, t.To(Device::CPU()));
        TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> v,
                                       h.ToVector<float>());
        results[i].push_back(v);
      }
    }
  }
  EXPECT_EQ(results[0], results[1]);
}

// LayerNorm (norm) on a simulated device: the CPU's values, bit for bit.
TEST_F(SimDeviceTest, LayerNormMatchesTheCpuExactly) {
  std::vector<float> xv(24), wv(4);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * ((i * 7) % 11) - 0.3f;
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.5f + 0.25f * i;
  std::vector<std::vector<float>> results[2];
  for (int i = 0; i < 2; ++i) {
    const Device d = i == 0 ? Device::CPU() : Device::Sim(0);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Tensor::FromVector(xv, {2, 3, 4}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor w, Tensor::FromVector(wv, {4}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, x.To(d));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(w, w.To(d));
    TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
    TANDEM_NN_ASSERT_OK(w.set_requires_grad(true));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, LayerNorm(x, {4}, w, w));
    EXPECT_EQ(y.device(), d);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y2, Mul(y, y));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(y2));
    TANDEM_NN_ASSERT_OK(loss.Backward());
    for (const Tensor& t : {y, x.grad(), w.grad()}) {
      EXPECT_EQ(t.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor h, t.To(Device::CPU()));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> v, h.ToVector<float>());
      results[i].push_back(v);
    }
  }
  EXPECT_EQ(results[0], results[1]);
}

// Pooling (pool): the three pools and their backward on a simulated device
// give the CPU's values and gradients, on the device.
TEST_F(SimDeviceTest, PoolingMatchesTheCpuExactly) {
  std::vector<float> xv(2 * 2 * 5 * 6);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * ((i * 7) % 11) - 0.3f;
  std::vector<std::vector<float>> results[2];
  for (int i = 0; i < 2; ++i) {
    const Device d = i == 0 ? Device::CPU() : Device::Sim(1);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x,
                                   Tensor::FromVector(xv, {2, 2, 5, 6}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, x.To(d));
    TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        Tensor a,
        MaxPool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, AvgPool2d(x, {.kernel = {3, 3},
                                                           .stride = {2, 2},
                                                           .padding = {1, 1},
                                                           .ceil_mode = true}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor c, AdaptiveAvgPool2d(x, {3, 4}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor sa, Sum(Mul(a, a).value()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor sb, Sum(Mul(b, b).value()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor sc, Sum(Mul(c, c).value()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Add(Add(sa, sb).value(), sc));
    TANDEM_NN_ASSERT_OK(loss.Backward());
    for (const Tensor& t : {a, b, c, x.grad()}) {
      EXPECT_EQ(t.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor h, t.To(Device::CPU()));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> v, h.ToVector<float>());
      results[i].push_back(v);
    }
  }
  EXPECT_EQ(results[0], results[1]);
}

// Permute (gpt): GPT's head moves on a simulated device give the CPU's
// values and gradient bit for bit, on the device; i64 too (moved as bytes).
TEST_F(SimDeviceTest, PermuteMatchesTheCpuExactly) {
  std::vector<float> xv(2 * 3 * 4 * 5);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * ((i * 7) % 11) - 0.3f;
  std::vector<int64_t> iv(xv.size());
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int64_t>(i) - 50;
  std::vector<std::vector<float>> results[2];
  std::vector<int64_t> ints[2];
  for (int i = 0; i < 2; ++i) {
    const Device d = i == 0 ? Device::CPU() : Device::Sim(2);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x,
                                   Tensor::FromVector(xv, {2, 3, 4, 5}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, x.To(d));
    TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Permute(x, {0, 2, 1, 3}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, Permute(x, {3, 1, 0, 2}));
    // Distinct weights per output, so a wrong gradient permutation shows.
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor sa, Sum(Mul(a, a).value()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor wb,
                                   Tensor::FromVector(xv, b.shape()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(wb, wb.To(d));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor sb, Sum(Mul(b, wb).value()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Add(sa, sb));
    TANDEM_NN_ASSERT_OK(loss.Backward());
    for (const Tensor& t : {a, b, x.grad()}) {
      EXPECT_EQ(t.device(), d);
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor h, t.To(Device::CPU()));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<float> v, h.ToVector<float>());
      results[i].push_back(v);
    }
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor xi,
                                   Tensor::FromVector(iv, {2, 3, 4, 5}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(xi, xi.To(d));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor pi, Permute(xi, {2, 3, 0, 1}));
    EXPECT_EQ(pi.device(), d);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor hi, pi.To(Device::CPU()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(ints[i], hi.ToVector<int64_t>());
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(ints[0], ints[1]);
  // Not the identity: the permutation moved elements.
  EXPECT_NE(results[0][0], xv);
}

TEST_F(SimDeviceTest, MemoryIsAccountedPerDevice) {
  const int64_t before = SimMemoryAllocated(2);
  ResetSimPeakMemory();
  {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        Tensor a, Tensor::Ones({1000}, DType::kF32, Device::Sim(2)));
    EXPECT_EQ(SimMemoryAllocated(2), before + 4000);
    // A kernel's result counts on the device it is labelled with, once.
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, Mul(a, 2.0));
    EXPECT_EQ(b.device(), Device::Sim(2));
    EXPECT_EQ(SimMemoryAllocated(2), before + 8000);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor c, Add(b, b));
    EXPECT_EQ(SimMemoryAllocated(2), before + 12000);
  }
  EXPECT_EQ(SimMemoryAllocated(2), before);
  EXPECT_EQ(SimMaxMemoryAllocated(2), before + 12000);
  ResetSimPeakMemory();
  EXPECT_EQ(SimMaxMemoryAllocated(2), before);
}

}  // namespace
}  // namespace tandem
