// Optimizer::ExportState / ImportState: an optimizer restored from another's
// exported state continues exactly as the original would (what checkpoints
// rely on), and bad state is refused without changing anything.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/optimizer.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using ::testing::HasSubstr;

std::vector<Tensor> Params() {
  Tensor a = *Tensor::FromVector<float>({0.5f, -1.25f, 2.f, 0.1f}, {2, 2});
  Tensor b = *Tensor::FromVector<float>({0.3f, -0.7f});
  EXPECT_TRUE(a.set_requires_grad(true).ok());
  EXPECT_TRUE(b.set_requires_grad(true).ok());
  return {a, b};
}

std::vector<Tensor> CloneParams(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) {
    Tensor c = p.Clone()->Detach();
    EXPECT_TRUE(c.set_requires_grad(true).ok());
    out.push_back(c);
  }
  return out;
}

// Sets gradient k (a deterministic function of the step) on every parameter.
void SetGrads(const std::vector<Tensor>& params, int step) {
  for (const Tensor& p : params) {
    std::vector<float> g(static_cast<size_t>(p.numel()));
    for (size_t j = 0; j < g.size(); ++j) {
      g[j] =
          0.1f * static_cast<float>(step + 1) - 0.03f * static_cast<float>(j);
    }
    ASSERT_TRUE(p.set_grad(*Tensor::FromVector<float>(g, p.shape())).ok());
  }
}

std::vector<std::vector<float>> Values(const std::vector<Tensor>& params) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : params) out.push_back(*p.ToVector<float>());
  return out;
}

// Serialization in memory: fresh copies, as a checkpoint round trip gives.
std::vector<StateEntry> Copy(const std::vector<StateEntry>& state) {
  std::vector<StateEntry> out;
  for (const StateEntry& e : state) out.push_back({e.name, *e.tensor.Clone()});
  return out;
}

template <typename MakeOpt>
void ExpectResumeIsExact(MakeOpt make) {
  std::vector<Tensor> params = Params();
  auto straight = make(params);
  for (int step = 0; step < 3; ++step) {
    SetGrads(params, step);
    ASSERT_TRUE(straight->Step().ok());
  }
  // The same run, "killed" after step 1 and resumed from its exported state.
  std::vector<Tensor> first = Params();
  auto before = make(first);
  SetGrads(first, 0);
  ASSERT_TRUE(before->Step().ok());
  const std::vector<StateEntry> saved = Copy(before->ExportState());
  ASSERT_FALSE(saved.empty());
  std::vector<Tensor> resumed_params = CloneParams(first);
  auto resumed = make(resumed_params);
  ASSERT_TRUE(resumed->ImportState(saved).ok());
  for (int step = 1; step < 3; ++step) {
    SetGrads(resumed_params, step);
    ASSERT_TRUE(resumed->Step().ok());
  }
  EXPECT_EQ(Values(resumed_params), Values(params));
}

TEST(OptimizerStateTest, SgdMomentumResumesBitForBit) {
  ExpectResumeIsExact([](std::vector<Tensor> p) {
    SgdOptions o;
    o.momentum = 0.9;
    return std::make_unique<Sgd>(*Sgd::Create(p, 0.1, o));
  });
}

TEST(OptimizerStateTest, AdamWResumesBitForBit) {
  ExpectResumeIsExact([](std::vector<Tensor> p) {
    AdamWOptions o;
    o.amsgrad = true;
    return std::make_unique<AdamW>(*AdamW::Create(p, o));
  });
}

TEST(OptimizerStateTest, ExportedNames) {
  std::vector<Tensor> params = Params();
  SgdOptions so;
  so.momentum = 0.9;
  Sgd sgd = *Sgd::Create(params, 0.1, so);
  AdamW adam = *AdamW::Create(params);
  EXPECT_TRUE(sgd.ExportState().empty());
  SetGrads(params, 0);
  ASSERT_TRUE(sgd.Step().ok());
  ASSERT_TRUE(adam.Step().ok());
  std::vector<std::string> names;
  for (const StateEntry& e : sgd.ExportState()) names.push_back(e.name);
  EXPECT_THAT(names,
              ::testing::ElementsAre("0.momentum_buffer", "1.momentum_buffer"));
  names.clear();
  for (const StateEntry& e : adam.ExportState()) names.push_back(e.name);
  EXPECT_THAT(names,
              ::testing::ElementsAre("0.step", "0.exp_avg", "0.exp_avg_sq",
                                     "1.step", "1.exp_avg", "1.exp_avg_sq"));
  EXPECT_EQ(*adam.ExportState()[0].tensor.ToVector<int64_t>(),
            std::vector<int64_t>{1});
}

TEST(OptimizerStateTest, BadStateIsRefusedAndChangesNothing) {
  std::vector<Tensor> params = Params();
  SgdOptions so;
  so.momentum = 0.9;
  Sgd sgd = *Sgd::Create(params, 0.1, so);
  SetGrads(params, 0);
  ASSERT_TRUE(sgd.Step().ok());
  const std::vector<float> buffer0 = *sgd.momentum_buffer(0).ToVector<float>();
  Tensor wrong = *Tensor::Zeros({3});
  Tensor right = *Tensor::Zeros({2});
  for (const auto& [state, phrase] :
       std::vector<std::pair<std::vector<StateEntry>, std::string>>{
           {{{"1.momentum_buffer", right}, {"0.momentum_buffer", wrong}},
            "\"0.momentum_buffer\" has [3] f32 but parameter 0 is [2, 2]"},
           {{{"2.momentum_buffer", right}}, "index below 2"},
           {{{"1.exp_avg", right}}, "is unknown or given twice"},
           {{{"x", right}}, "\"x\" is not"}}) {
    absl::Status s = sgd.ImportState(state);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr(phrase));
    EXPECT_EQ(*sgd.momentum_buffer(0).ToVector<float>(), buffer0);
  }
  AdamW adam = *AdamW::Create(params);
  absl::Status s = adam.ImportState({{"1.exp_avg", right}});
  EXPECT_THAT(std::string(s.message()), HasSubstr("parameter 1 is incomplete"));
}

}  // namespace
}  // namespace tandem::optim
