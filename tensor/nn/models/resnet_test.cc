// nn::ResNet against torchvision 0.14: the module tree, the state-dict names
// and shapes and the parameter counts of resnet18/34/50, resnet18's initial
// weights bit for bit at a seed, and its logits on a fixed input in eval
// and train mode. The expected values are in testdata/resnet_fixtures.inc,
// written by testdata/make_resnet_fixtures.py (no PyTorch needed here).
#include "tensor/nn/models/resnet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tensor/generator.h"
#include "tensor/nn/module.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

using ::testing::HasSubstr;

struct ModuleEntry {
  const char* name;
  const char* type;
};
struct StateEntry {
  const char* name;
  std::vector<int64_t> shape;
};
struct InitEntry {
  const char* name;
  std::vector<uint32_t> head, tail;  // f32 bit patterns; empty for int64
  double sum;                        // in element order, in double
};
#include "tensor/nn/models/testdata/resnet_fixtures.inc"

// PyTorch's named_modules(): the module itself ("") and its descendants,
// depth first, in registration order.
void NamedModules(const Module& m, const std::string& prefix,
                  std::vector<std::pair<std::string, std::string>>& out) {
  out.emplace_back(prefix, std::string(m.type_name()));
  for (const auto& [name, child] : m.NamedChildren()) {
    NamedModules(*child, prefix.empty() ? name : prefix + "." + name, out);
  }
}

template <size_t M, size_t S>
void CheckStructure(const Module& model, const ModuleEntry (&modules)[M],
                    const StateEntry (&state)[S], int64_t parameters) {
  std::vector<std::pair<std::string, std::string>> got;
  NamedModules(model, "", got);
  ASSERT_EQ(got.size(), M);
  for (size_t i = 0; i < M; ++i) {
    EXPECT_EQ(got[i].first, modules[i].name) << i;
    EXPECT_EQ(got[i].second, modules[i].type) << modules[i].name;
  }
  const StateDict sd = model.StateDict();
  ASSERT_EQ(sd.size(), S);
  for (size_t i = 0; i < S; ++i) {
    EXPECT_EQ(sd[i].name, state[i].name) << i;
    EXPECT_EQ(sd[i].tensor.shape(), Shape(state[i].shape)) << state[i].name;
  }
  EXPECT_EQ(model.NumParameters(), parameters);
}

// One construction of each (the whole test's CPU cost is dominated by
// drawing 59 million initial weights).
TEST(ResNetTest, StructureMatchesTorchvision) {
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto r18, Resnet18(1000, gen));
  CheckStructure(*r18, kResnet18Modules, kResnet18State, kResnet18Parameters);
  EXPECT_EQ(r18->NumParameters(), 11689512);  // the published figure
  r18.reset();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto r34, Resnet34(1000, gen));
  CheckStructure(*r34, kResnet34Modules, kResnet34State, kResnet34Parameters);
  EXPECT_EQ(r34->NumParameters(), 21797672);
  r34.reset();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto r50, Resnet50(1000, gen));
  CheckStructure(*r50, kResnet50Modules, kResnet50State, kResnet50Parameters);
  EXPECT_EQ(r50->NumParameters(), 25557032);
}

// The count from the sizes alone equals the built model's, for every
// architecture and a few class counts.
TEST(ResNetTest, ArchitecturesByTorchvisionsNames) {
  using K = ResNet::BlockKind;
  absl::StatusOr<ResNetArch> r34 = ResNetArchOf("resnet34");
  ASSERT_TRUE(r34.ok()) << r34.status();
  EXPECT_EQ(r34->block, K::kBasic);
  EXPECT_EQ(r34->layers, (std::array<int64_t, 4>{3, 4, 6, 3}));
  EXPECT_EQ(ResNetArchOf("resnet18")->layers,
            (std::array<int64_t, 4>{2, 2, 2, 2}));
  EXPECT_EQ(ResNetArchOf("resnet50")->block, K::kBottleneck);
  EXPECT_EQ(ResNetArchOf("resnet101").status(),
            absl::InvalidArgumentError(
                "no ResNet architecture named \"resnet101\"; expected "
                "resnet18, resnet34 or resnet50"));
}

TEST(ResNetTest, NumParametersOfEqualsTheBuiltModels) {
  using K = ResNet::BlockKind;
  EXPECT_EQ(ResNet::NumParametersOf(K::kBasic, {2, 2, 2, 2}, 1000), 11689512);
  EXPECT_EQ(ResNet::NumParametersOf(K::kBasic, {3, 4, 6, 3}, 1000), 21797672);
  EXPECT_EQ(ResNet::NumParametersOf(K::kBottleneck, {3, 4, 6, 3}, 1000),
            25557032);
  Generator gen(2);
  for (int64_t classes : {2, 10}) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto r18, Resnet18(classes, gen));
    EXPECT_EQ(ResNet::NumParametersOf(K::kBasic, {2, 2, 2, 2}, classes),
              r18->NumParameters());
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto r50, Resnet50(classes, gen));
    EXPECT_EQ(ResNet::NumParametersOf(K::kBottleneck, {3, 4, 6, 3}, classes),
              r50->NumParameters());
  }
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// The input of the fixture's forward: x[i] = sin(0.37 i), f32, [2, 3, 32, 32].
Tensor Input() {
  std::vector<float> v(2 * 3 * 32 * 32);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  }
  return Tensor::FromVector(v, {2, 3, 32, 32}).value();
}

void ExpectLogits(const Tensor& y, const double (&expected)[20], double tol,
                  const char* mode) {
  SCOPED_TRACE(mode);
  ASSERT_EQ(y.shape(), Shape({2, 10}));
  const std::vector<double> got =
      y.To(DType::kF64).value().ToVector<double>().value();
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    EXPECT_NEAR(got[i], expected[i], tol) << i;
    worst = std::max(worst, std::abs(got[i] - expected[i]));
  }
  std::printf("%s logits: largest difference from torchvision %.3g\n", mode,
              worst);
}

TEST(ResNetTest, Resnet18MatchesTorchvisionAtSeed0) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model, Resnet18(10, gen));
  const StateDict sd = model->StateDict();
  ASSERT_EQ(sd.size(), std::size(kResnet18Init));
  for (size_t i = 0; i < sd.size(); ++i) {
    const InitEntry& e = kResnet18Init[i];
    SCOPED_TRACE(e.name);
    ASSERT_EQ(sd[i].name, e.name);
    const Tensor& t = sd[i].tensor;
    if (e.head.empty()) {  // num_batches_tracked
      EXPECT_EQ(t.dtype(), DType::kI64);
      EXPECT_EQ(t.To(DType::kF64).value().ToVector<double>().value()[0], e.sum);
      continue;
    }
    ASSERT_EQ(t.dtype(), DType::kF32);
    const float* p = t.data<float>();
    const int64_t n = t.numel();
    ASSERT_GE(n, 4);
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(Hex(Bits(p[k])), Hex(e.head[k])) << "element " << k;
      EXPECT_EQ(Hex(Bits(p[n - 4 + k])), Hex(e.tail[k]))
          << "element " << n - 4 + k;
    }
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) sum += p[k];
    EXPECT_EQ(sum, e.sum);  // the same additions in the same order
  }

  // Eval logits in f32: convolutions here are im2col + BLAS, PyTorch's are
  // oneDNN, so the sums round differently; 2e-5 is about 30 times the
  // largest difference seen (6e-7) and far below the logits' spread.
  model->Eval();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor eval, model->Forward(Input()));
  ExpectLogits(eval, kResnet18LogitsEval, 2e-5, "eval f32");

  // Train mode normalises layer4's 2 values per channel (a 1x1 map, batch
  // 2), which amplifies f32 rounding about 10^4-fold: PyTorch's own f32 and
  // f64 logits differ by 2e-2. So f32 is held to 5e-2 (a sign or scale
  // error would exceed it), and the same weights in f64 to 1e-9.
  model->Train();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor train, model->Forward(Input()));
  ExpectLogits(train, kResnet18LogitsTrain, 5e-2, "train f32");

  Generator other(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto model64,
                                 Resnet18(10, other, {.dtype = DType::kF64}));
  StateDict widened;
  for (const NamedTensor& e : model->StateDict()) {
    widened.push_back({e.name, e.tensor.dtype() == DType::kF32
                                   ? e.tensor.To(DType::kF64).value()
                                   : e.tensor});
  }
  TANDEM_NN_ASSERT_OK(model64->LoadStateDict(widened));
  model64->Train();
  Tensor x64 = Input().To(DType::kF64).value();
  TANDEM_NN_ASSERT_OK(x64.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor train64, model64->Forward(x64));
  ExpectLogits(train64, kResnet18LogitsTrainF64, 1e-9, "train f64");

  // Gradients reach the input and the stem through every block.
  TANDEM_NN_ASSERT_OK(Sum(train64).value().Backward());
  for (const Tensor& g :
       {x64.grad(), model64->NamedParameters()[0].tensor.grad()}) {
    ASSERT_TRUE(g.defined());
    EXPECT_GT(Sum(Mul(g, g).value()).value().Item().value(), 0);
  }
}

TEST(ResNetTest, RefusesBadArguments) {
  Generator gen(0);
  absl::StatusOr<std::unique_ptr<ResNet>> r = Resnet18(0, gen);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("num_classes must be >= 1"));
  r = ResNet::Create(ResNet::BlockKind::kBasic, {2, 0, 2, 2}, 10, gen);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("layer2 must have >= 1 block"));
  r = Resnet18(10, gen, {.dtype = DType::kI64});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("dtype must be f32 or f64"));
}

}  // namespace
}  // namespace tandem::nn
