// Training on the device against the CPU: the fused Sgd/AdamW kernels
// reproduce the CPU update bit for bit; MLP and conv-net training steps
// match the CPU within float tolerance. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/cuda/cuda.h"
#include "tensor/cuda/test_util.h"
#include "tensor/ops.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

using ::tandem::cuda_test::ExpectBitwiseEqual;
using ::tandem::cuda_test::ExpectClose;
using ::tandem::cuda_test::Random;
using ::tandem::cuda_test::ToCuda;

// Parameters (leaves requiring grad) with the same values on both sides.
struct Twin {
  std::vector<Tensor> cpu, gpu;
};

Twin MakeParams(const std::vector<Shape>& shapes, DType dtype, uint32_t seed) {
  Twin t;
  for (const Shape& s : shapes) {
    Tensor p = Random(s, dtype, seed++, -0.5, 0.5);
    Tensor d = ToCuda(p);
    EXPECT_TRUE(p.set_requires_grad(true).ok());
    EXPECT_TRUE(d.set_requires_grad(true).ok());
    t.cpu.push_back(p);
    t.gpu.push_back(d);
  }
  return t;
}

// Gives both sides the same random gradients.
void SetGrads(const Twin& t, uint32_t seed) {
  for (size_t i = 0; i < t.cpu.size(); ++i) {
    Tensor g = Random(t.cpu[i].shape(), t.cpu[i].dtype(), seed + i);
    ASSERT_TRUE(t.cpu[i].set_grad(g).ok());
    ASSERT_TRUE(t.gpu[i].set_grad(ToCuda(g)).ok());
  }
}

class OptimCudaTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { TANDEM_REQUIRE_CUDA(); }
};

TEST_P(OptimCudaTest, SgdMatchesTheCpuBitForBit) {
  std::vector<optim::SgdOptions> configs(5);
  configs[1].momentum = 0.9;
  configs[2].momentum = 0.9;
  configs[2].dampening = 0.1;
  configs[2].weight_decay = 1e-2;
  configs[3].momentum = 0.8;
  configs[3].nesterov = true;
  configs[3].weight_decay = 3e-3;
  configs[4].maximize = true;
  configs[4].weight_decay = 0.5;
  for (size_t c = 0; c < configs.size(); ++c) {
    Twin t = MakeParams({{7, 5}, {5}, {1000}}, GetParam(), 10);
    optim::Sgd cpu = optim::Sgd::Create(t.cpu, 0.05, configs[c]).value();
    optim::Sgd gpu = optim::Sgd::Create(t.gpu, 0.05, configs[c]).value();
    for (int step = 0; step < 4; ++step) {
      SetGrads(t, 100 + step);
      ASSERT_TRUE(cpu.Step().ok());
      absl::Status s = gpu.Step();
      ASSERT_TRUE(s.ok()) << s;
      for (size_t i = 0; i < t.cpu.size(); ++i) {
        ExpectBitwiseEqual(t.gpu[i], t.cpu[i],
                           "config " + std::to_string(c) + " step " +
                               std::to_string(step) + " param " +
                               std::to_string(i));
      }
    }
  }
}

TEST_P(OptimCudaTest, AdamWMatchesTheCpuBitForBit) {
  std::vector<optim::AdamWOptions> configs(3);
  configs[0].lr = 1e-2;
  configs[1].lr = 3e-3;
  configs[1].amsgrad = true;
  configs[1].weight_decay = 0.1;
  configs[2].maximize = true;
  configs[2].beta1 = 0.5;
  configs[2].eps = 1e-6;
  for (size_t c = 0; c < configs.size(); ++c) {
    Twin t = MakeParams({{7, 5}, {5}, {1000}}, GetParam(), 20);
    optim::AdamW cpu = optim::AdamW::Create(t.cpu, configs[c]).value();
    optim::AdamW gpu = optim::AdamW::Create(t.gpu, configs[c]).value();
    for (int step = 0; step < 4; ++step) {
      SetGrads(t, 200 + step);
      ASSERT_TRUE(cpu.Step().ok());
      absl::Status s = gpu.Step();
      ASSERT_TRUE(s.ok()) << s;
      for (size_t i = 0; i < t.cpu.size(); ++i) {
        const std::string what = "config " + std::to_string(c) + " step " +
                                 std::to_string(step) + " param " +
                                 std::to_string(i);
        ExpectBitwiseEqual(t.gpu[i], t.cpu[i], what);
        ExpectBitwiseEqual(gpu.exp_avg_sq(i), cpu.exp_avg_sq(i), what);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(F32AndF64, OptimCudaTest,
                         ::testing::Values(DType::kF32, DType::kF64),
                         [](const auto& info) {
                           return std::string(DTypeName(info.param));
                         });

// Forward + backward + optimizer step on one side.
absl::StatusOr<Tensor> MlpLoss(const std::vector<Tensor>& p, const Tensor& x,
                               const Tensor& labels) {
  absl::StatusOr<Tensor> h = Linear(x, p[0], p[1]);
  if (h.ok()) h = Tanh(*h);
  if (h.ok()) h = Linear(*h, p[2], p[3]);
  if (h.ok()) h = Relu(*h);
  if (h.ok()) h = Linear(*h, p[4], p[5]);
  if (!h.ok()) return h;
  return CrossEntropy(*h, labels);
}

TEST(TrainingCudaTest, MlpStepsMatchTheCpu) {
  TANDEM_REQUIRE_CUDA();
  Twin t = MakeParams({{32, 8}, {32}, {16, 32}, {16}, {4, 16}, {4}},
                      DType::kF32, 30);
  Tensor x = Random({64, 8}, DType::kF32, 40);
  std::vector<int64_t> y(64);
  for (int i = 0; i < 64; ++i) y[i] = (i * 5 + i / 7) % 4;
  Tensor labels = Tensor::FromVector(y).value();
  Tensor xd = ToCuda(x), labels_d = ToCuda(labels);
  optim::SgdOptions o;
  o.momentum = 0.9;
  o.weight_decay = 1e-4;
  optim::Sgd cpu = optim::Sgd::Create(t.cpu, 0.1, o).value();
  optim::Sgd gpu = optim::Sgd::Create(t.gpu, 0.1, o).value();
  for (int step = 0; step < 5; ++step) {
    cpu.ZeroGrad();
    gpu.ZeroGrad();
    Tensor lc = MlpLoss(t.cpu, x, labels).value();
    Tensor lg = MlpLoss(t.gpu, xd, labels_d).value();
    ExpectClose(lg, lc, 1e-5, "loss at step " + std::to_string(step));
    ASSERT_TRUE(lc.Backward().ok());
    ASSERT_TRUE(lg.Backward().ok());
    ASSERT_TRUE(cpu.Step().ok());
    ASSERT_TRUE(gpu.Step().ok());
    for (size_t i = 0; i < t.cpu.size(); ++i) {
      ExpectClose(
          t.gpu[i], t.cpu[i], 1e-5,
          "param " + std::to_string(i) + " after step " + std::to_string(step));
    }
  }
}

absl::StatusOr<Tensor> ConvNetLoss(const std::vector<Tensor>& p,
                                   const Tensor& x, const Tensor& labels) {
  absl::StatusOr<Tensor> h = Conv2d(x, p[0], p[1], {.padding = {1, 1}});
  if (h.ok()) h = Relu(*h);
  if (h.ok()) h = MaxPool2d(*h);
  if (h.ok()) h = Conv2d(*h, p[2], p[3], {.stride = {2, 2}});
  if (h.ok()) h = Relu(*h);
  if (h.ok()) h = Flatten(*h, 1);
  if (h.ok()) h = Linear(*h, p[4], p[5]);
  if (!h.ok()) return h;
  return CrossEntropy(*h, labels);
}

TEST(TrainingCudaTest, ConvNetStepsMatchTheCpu) {
  TANDEM_REQUIRE_CUDA();
  // [8, 1, 12, 12] -> conv 3x3 p1 -> [8, 6, 12, 12] -> pool -> [8, 6, 6, 6]
  // -> conv 2x2 s2 -> [8, 8, 3, 3] -> flatten 72 -> linear -> 10 classes.
  Twin t = MakeParams({{6, 1, 3, 3}, {6}, {8, 6, 2, 2}, {8}, {10, 72}, {10}},
                      DType::kF32, 50);
  Tensor x = Random({8, 1, 12, 12}, DType::kF32, 60, 0, 1);
  Tensor labels =
      Tensor::FromVector(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6}).value();
  Tensor xd = ToCuda(x), labels_d = ToCuda(labels);
  optim::AdamWOptions o;
  o.lr = 1e-2;
  optim::AdamW cpu = optim::AdamW::Create(t.cpu, o).value();
  optim::AdamW gpu = optim::AdamW::Create(t.gpu, o).value();
  for (int step = 0; step < 3; ++step) {
    cpu.ZeroGrad();
    gpu.ZeroGrad();
    Tensor lc = ConvNetLoss(t.cpu, x, labels).value();
    Tensor lg = ConvNetLoss(t.gpu, xd, labels_d).value();
    ExpectClose(lg, lc, 1e-5, "loss at step " + std::to_string(step));
    ASSERT_TRUE(lc.Backward().ok());
    ASSERT_TRUE(lg.Backward().ok());
    for (size_t i = 0; i < t.cpu.size(); ++i) {
      ExpectClose(
          t.gpu[i].grad(), t.cpu[i].grad(), 1e-4,
          "grad " + std::to_string(i) + " at step " + std::to_string(step));
    }
    ASSERT_TRUE(cpu.Step().ok());
    ASSERT_TRUE(gpu.Step().ok());
  }
}

}  // namespace
}  // namespace tandem
