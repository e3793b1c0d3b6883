// Parameter groups (AdamW, Sgd) against torch.optim with two groups,
// nanoGPT's weight-decay split, and the groups' export/import for
// checkpoints.
#include "tensor/optim/param_groups.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/module.h"
#include "tensor/nn/test_util.h"
#include "tensor/optim/adamw.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"

namespace tandem::optim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// W (3x2, the "decay" group), b (2) and ln (3) (the "no decay" group), f64.
struct Params {
  Tensor w, b, ln;
};

Params MakeParams() {
  Params p;
  p.w = *Tensor::FromVector<double>({0.5, -1.25, 2.0, 0.1, -0.3, 0.7}, {3, 2});
  p.b = *Tensor::FromVector<double>({0.3, -0.7});
  p.ln = *Tensor::FromVector<double>({1.0, 0.9, 1.1});
  for (Tensor* t : {&p.w, &p.b, &p.ln}) {
    EXPECT_TRUE(t->set_requires_grad(true).ok());
  }
  return p;
}

// Parameter k's gradient at `step`: 0.1 (step + 1) - 0.03 j + 0.05 k (-1)^j.
void SetGrads(const Params& p, int step) {
  int k = 0;
  for (const Tensor* t : {&p.w, &p.b, &p.ln}) {
    std::vector<double> g(static_cast<size_t>(t->numel()));
    for (size_t j = 0; j < g.size(); ++j) {
      g[j] = 0.1 * (step + 1) - 0.03 * static_cast<double>(j) +
             0.05 * k * (j % 2 == 0 ? 1 : -1);
    }
    ASSERT_TRUE(t->set_grad(*Tensor::FromVector<double>(g, t->shape())).ok());
    ++k;
  }
}

void ExpectNear(const Tensor& t, const std::vector<double>& want) {
  std::vector<double> got = *t.ToVector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-12 * std::abs(want[i])) << "element " << i;
  }
}

// PyTorch 1.13 (python3, torch.set_default_dtype(torch.float64); the same
// W, b, ln and gradients, 5 steps):
//   torch.optim.AdamW([{'params': [W], 'weight_decay': 0.1},
//                      {'params': [b, ln], 'weight_decay': 0.0, 'lr': 0.02,
//                       'betas': (0.8, 0.99), 'eps': 1e-6}],
//                     lr=0.01, betas=(0.9, 0.95))
TEST(AdamWGroupsTest, TwoGroupsMatchTorch) {
  Params p = MakeParams();
  AdamWParamGroup decay{.params = {p.w}, .weight_decay = 0.1};
  AdamWParamGroup no_decay{.params = {p.b, p.ln},
                           .lr = 0.02,
                           .beta1 = 0.8,
                           .beta2 = 0.99,
                           .eps = 1e-6,
                           .weight_decay = 0.0};
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      AdamW adam, AdamW::Create({decay, no_decay},
                                {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95}));
  ASSERT_EQ(adam.num_param_groups(), 2u);
  EXPECT_EQ(adam.group_begin(1), 1u);
  EXPECT_EQ(adam.group_end(1), 3u);
  EXPECT_EQ(adam.lr(0), 0.01);
  EXPECT_EQ(adam.lr(1), 0.02);
  for (int step = 0; step < 5; ++step) {
    SetGrads(p, step);
    TANDEM_NN_ASSERT_OK(adam.Step());
  }
  ExpectNear(p.w,
             {0.44975197026706476, -1.2907583147223765, 1.9442298004890313,
              0.055827838982343815, -0.31809588806112554, 0.6847762131650923});
  ExpectNear(p.b, {0.19885661616293565, -0.7953712640338308});
  ExpectNear(p.ln,
             {0.8984618841190781, 0.8577473079812356, 0.9989802761507109});
}

// torch.optim.SGD([{'params': [W], 'weight_decay': 0.1},
//                  {'params': [b, ln], 'lr': 0.02, 'momentum': 0.5,
//                   'dampening': 0.1}], lr=0.01, momentum=0.9)
TEST(SgdGroupsTest, TwoGroupsMatchTorch) {
  Params p = MakeParams();
  SgdParamGroup first{.params = {p.w}, .weight_decay = 0.1};
  SgdParamGroup second{
      .params = {p.b, p.ln}, .lr = 0.02, .momentum = 0.5, .dampening = 0.1};
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Sgd sgd, Sgd::Create({first, second}, 0.01, {.momentum = 0.9}));
  for (int step = 0; step < 5; ++step) {
    SetGrads(p, step);
    TANDEM_NN_ASSERT_OK(sgd.Step());
  }
  ExpectNear(p.w,
             {0.46179094282389854, -1.2613271618907294, 1.9499891351376377,
              0.0788379983707198, -0.31198281787329946, 0.6788379983707197});
  ExpectNear(p.b, {0.25267500000000004, -0.7279549999999999});
  ExpectNear(p.ln,
             {0.9452250000000001, 0.8794950000000001, 1.0541650000000002});
}

TEST(AdamWGroupsTest, RefusesBadGroups) {
  Params p = MakeParams();
  absl::StatusOr<AdamW> twice =
      AdamW::Create({{.params = {p.w, p.b}}, {.params = {p.b}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("same tensor"));
  absl::StatusOr<AdamW> bad_beta =
      AdamW::Create({{.params = {p.w}}, {.params = {p.b}, .beta2 = 1.0}});
  ASSERT_FALSE(bad_beta.ok());
  EXPECT_THAT(bad_beta.status().message(),
              HasSubstr("AdamW parameter group 1: Invalid beta parameter at "
                        "index 1"));
  EXPECT_FALSE(AdamW::Create(std::vector<AdamWParamGroup>{}).ok());
  // An empty group beside a non-empty one is fine (a model without biases).
  EXPECT_TRUE(
      AdamW::Create(std::vector<AdamWParamGroup>{{.params = {p.w}}, {}}).ok());
}

TEST(OptimizerGroupsTest, SetLrPerGroupAndAll) {
  Params p = MakeParams();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Sgd sgd, Sgd::Create({{.params = {p.w}}, {.params = {p.b}}}, 0.1));
  TANDEM_NN_ASSERT_OK(sgd.set_lr(1, 0.5));
  EXPECT_EQ(sgd.lr(0), 0.1);
  EXPECT_EQ(sgd.lr(1), 0.5);
  EXPECT_EQ(sgd.set_lr(2, 0.5).code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(sgd.set_lr(1, -1).ok());
  EXPECT_EQ(sgd.lr(1), 0.5);
  TANDEM_NN_ASSERT_OK(sgd.set_lr(0.25));
  EXPECT_EQ(sgd.lr(0), 0.25);
  EXPECT_EQ(sgd.lr(1), 0.25);
  // The lr of group 1 only: group 0's parameter takes the old step.
  SetGrads(p, 0);
  TANDEM_NN_ASSERT_OK(sgd.set_lr(1, 1.0));
  TANDEM_NN_ASSERT_OK(sgd.Step());
  EXPECT_EQ(p.w.ToVector<double>()->at(0), 0.5 - 0.25 * 0.1);
  EXPECT_EQ(p.b.ToVector<double>()->at(0), 0.3 - 1.0 * (0.1 + 0.05));
}

// state_dict()["param_groups"]: params indexed in order, hyper-parameters.
TEST(OptimizerGroupsTest, ExportImportParamGroups) {
  Params p = MakeParams();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      AdamW adam, AdamW::Create({{.params = {p.w}, .weight_decay = 0.1},
                                 {.params = {p.b, p.ln}, .lr = 0.02}}));
  std::vector<ParamGroupState> groups = adam.ExportParamGroups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_THAT(groups[0].params, ElementsAre(0));
  EXPECT_THAT(groups[1].params, ElementsAre(1, 2));
  EXPECT_EQ(groups[0].options.at("weight_decay"), 0.1);
  EXPECT_EQ(groups[1].options.at("lr"), 0.02);
  EXPECT_EQ(groups[1].options.at("beta2"), 0.999);
  EXPECT_EQ(groups[1].options.size(), 5u);

  Params q = MakeParams();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      AdamW other, AdamW::Create({{.params = {q.w}}, {.params = {q.b, q.ln}}}));
  groups[1].options["lr"] = 0.005;
  TANDEM_NN_ASSERT_OK(other.ImportParamGroups(groups));
  EXPECT_EQ(other.lr(1), 0.005);
  EXPECT_EQ(other.group_options(0).weight_decay, 0.1);
  EXPECT_EQ(other.group_options(1).weight_decay, 0.01);

  // All or nothing: a bad value in group 1 leaves group 0 as it was.
  std::vector<ParamGroupState> bad = groups;
  bad[0].options["weight_decay"] = 0.3;
  bad[1].options["beta1"] = 2;
  absl::Status s = other.ImportParamGroups(bad);
  EXPECT_THAT(s.message(), HasSubstr("parameter group 1"));
  EXPECT_EQ(other.group_options(0).weight_decay, 0.1);
  bad = groups;
  bad[1].params = {1};
  EXPECT_THAT(other.ImportParamGroups(bad).message(), HasSubstr("same groups"));
  bad = groups;
  bad[0].options["momentum"] = 0.9;
  EXPECT_THAT(other.ImportParamGroups(bad).message(),
              HasSubstr("unknown key \"momentum\""));
  bad = groups;
  bad[0].options.erase("eps");
  EXPECT_THAT(other.ImportParamGroups(bad).message(), HasSubstr("\"eps\""));
  EXPECT_THAT(other.ImportParamGroups({groups[0]}).message(),
              HasSubstr("1 parameter group(s) but the optimizer has 2"));
}

TEST(WeightDecayGroupsTest, SplitsAsNanoGpt) {
  Generator gen(3);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto linear, nn::Linear::Create(4, 3, gen));
  std::vector<nn::NamedTensor> named = linear->NamedParameters();
  ASSERT_EQ(named.size(), 2u);
  // A tied weight listed twice and a frozen tensor.
  named.push_back({"tied.weight", named[0].tensor});
  Tensor frozen = *Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2});
  named.push_back({"frozen", frozen});
  WeightDecaySplit split = SplitForWeightDecay(named);
  ASSERT_EQ(split.decay.size(), 1u);
  EXPECT_EQ(split.decay[0].name, "weight");
  ASSERT_EQ(split.no_decay.size(), 1u);
  EXPECT_EQ(split.no_decay[0].name, "bias");
  std::vector<AdamWParamGroup> groups = WeightDecayGroups(named, 0.1);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.1);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(AdamW adam,
                                 AdamW::Create(groups, {.weight_decay = 0.5}));
  EXPECT_EQ(adam.group_options(0).weight_decay, 0.1);
  EXPECT_EQ(adam.group_options(1).weight_decay, 0.0);
  EXPECT_EQ(adam.params()[0].impl(), named[0].tensor.impl());
  EXPECT_EQ(adam.params()[1].impl(), named[1].tensor.impl());
}

// The plain-tensor form: split by dimensions, every tensor kept as given
// (a shard that does not require grad included).
TEST(WeightDecayGroupsTest, PlainTensorsSplitByDimensions) {
  Params p = MakeParams();
  Tensor shard = *Tensor::Zeros({4});  // requires no grad
  std::vector<AdamWParamGroup> groups =
      WeightDecayGroups(std::vector<Tensor>{p.w, shard, p.b}, 0.3);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.3);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  ASSERT_EQ(groups[0].params.size(), 1u);
  EXPECT_EQ(groups[0].params[0].impl(), p.w.impl());
  ASSERT_EQ(groups[1].params.size(), 2u);
  EXPECT_EQ(groups[1].params[0].impl(), shard.impl());
  EXPECT_EQ(groups[1].params[1].impl(), p.b.impl());
}

// Per-element weight decay (SetElementWeightDecay): one flat tensor of W,
// b and ln (what a ZeRO/FSDP shard is) with runs {W: 0.1, b and ln: 0}
// steps bit for bit as nanoGPT's two groups over the separate tensors.
TEST(AdamWGroupsTest, ElementWeightDecayRunsEqualTheGroups) {
  Params p = MakeParams();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      AdamW groups,
      AdamW::Create({{.params = {p.w}, .weight_decay = 0.1},
                     {.params = {p.b, p.ln}, .weight_decay = 0.0}},
                    {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95}));
  std::vector<double> flat_values;
  for (const Tensor* t : {&p.w, &p.b, &p.ln}) {
    std::vector<double> v = *t->ToVector<double>();
    flat_values.insert(flat_values.end(), v.begin(), v.end());
  }
  Tensor flat = *Tensor::FromVector<double>(flat_values);
  ASSERT_TRUE(flat.set_requires_grad(true).ok());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      AdamW sharded,
      AdamW::Create({flat}, {.lr = 0.01,
                             .beta1 = 0.9,
                             .beta2 = 0.95,
                             .weight_decay = 0.5}));  // replaced by the runs
  TANDEM_NN_ASSERT_OK(
      sharded.SetElementWeightDecay(0, {{0, 6, 0.1}, {6, 11, 0.0}}));
  for (int step = 0; step < 5; ++step) {
    SetGrads(p, step);
    std::vector<double> g;
    for (const Tensor* t : {&p.w, &p.b, &p.ln}) {
      std::vector<double> v = *t->grad().ToVector<double>();
      g.insert(g.end(), v.begin(), v.end());
    }
    ASSERT_TRUE(flat.set_grad(*Tensor::FromVector<double>(g)).ok());
    TANDEM_NN_ASSERT_OK(groups.Step());
    TANDEM_NN_ASSERT_OK(sharded.Step());
  }
  std::vector<double> want;
  for (const Tensor* t : {&p.w, &p.b, &p.ln}) {
    std::vector<double> v = *t->ToVector<double>();
    want.insert(want.end(), v.begin(), v.end());
  }
  EXPECT_EQ(*flat.ToVector<double>(), want);
}

TEST(AdamWGroupsTest, ElementWeightDecayRunsAreChecked) {
  Params p = MakeParams();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(AdamW adam, AdamW::Create({p.w, p.b}));
  for (const std::vector<WeightDecayRun>& bad :
       std::vector<std::vector<WeightDecayRun>>{
           {{0, 4, 0.1}},               // ends short of 6
           {{0, 3, 0.1}, {4, 6, 0.0}},  // a gap
           {{0, 6, -1.0}},              // negative
           {{0, 6, std::nan("")}}}) {   // not finite
    absl::Status s = adam.SetElementWeightDecay(0, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  }
  EXPECT_THAT(adam.SetElementWeightDecay(2, {}).message(),
              HasSubstr("there are 2 parameters"));
  EXPECT_TRUE(adam.SetElementWeightDecay(1, {{0, 2, 0.0}}).ok());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Sgd sgd, Sgd::Create({p.w}, 0.1));
  EXPECT_EQ(sgd.SetElementWeightDecay(0, {{0, 6, 0.0}}).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tandem::optim
