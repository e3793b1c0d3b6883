#include "tensor/nn/module.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::nn {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<NamedTensor>& entries) {
  std::vector<std::string> names;
  for (const NamedTensor& e : entries) names.push_back(e.name);
  return names;
}

std::vector<float> Floats(const Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToVector<float>();
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *v : std::vector<float>();
}

// A module with its own parameter and buffer, a Linear child and a
// Sequential child, like
//   class Net(nn.Module):
//     def __init__(self):
//       super().__init__()
//       self.scale = nn.Parameter(torch.ones(2))
//       self.register_buffer("steps", torch.zeros(1, dtype=torch.int64))
//       self.fc = nn.Linear(3, 2)
//       self.head = nn.Sequential(nn.ReLU(), nn.Linear(2, 1))
// whose state_dict().keys() are
//   scale, steps, fc.weight, fc.bias, head.1.weight, head.1.bias
class Net : public Module {
 public:
  static absl::StatusOr<std::unique_ptr<Net>> Create(Generator& gen) {
    auto net = std::unique_ptr<Net>(new Net());
    TANDEM_ASSIGN_OR_RETURN(net->scale_, Tensor::Ones({2}));
    TANDEM_RETURN_IF_ERROR(net->RegisterParameter("scale", net->scale_));
    TANDEM_ASSIGN_OR_RETURN(Tensor steps, Tensor::Zeros({1}, DType::kI64));
    TANDEM_RETURN_IF_ERROR(net->RegisterBuffer("steps", steps));
    TANDEM_ASSIGN_OR_RETURN(
        net->fc_, net->RegisterModule("fc", Linear::Create(3, 2, gen)));
    auto head = std::make_unique<Sequential>();
    TANDEM_RETURN_IF_ERROR(head->Append(std::make_unique<ReLU>()));
    TANDEM_RETURN_IF_ERROR(head->Append(Linear::Create(2, 1, gen)));
    TANDEM_ASSIGN_OR_RETURN(net->head_,
                            net->RegisterModule("head", std::move(head)));
    return net;
  }

  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    TANDEM_ASSIGN_OR_RETURN(Tensor h, fc_->Forward(x));
    TANDEM_ASSIGN_OR_RETURN(h, Mul(h, scale_));
    return head_->Forward(h);
  }
  std::string_view type_name() const override { return "Net"; }

  // Exposes the protected registration API to the tests.
  using Module::RegisterBuffer;
  using Module::RegisterModule;
  using Module::RegisterParameter;

  Linear* fc() const { return fc_; }

 private:
  Net() = default;
  Tensor scale_;
  Linear* fc_ = nullptr;
  Sequential* head_ = nullptr;
};

TEST(ModuleTest, NamesAndOrderFollowPyTorch) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  EXPECT_THAT(Names(net->NamedParameters()),
              ElementsAre("scale", "fc.weight", "fc.bias", "head.1.weight",
                          "head.1.bias"));
  EXPECT_THAT(Names(net->NamedBuffers()), ElementsAre("steps"));
  EXPECT_THAT(Names(net->StateDict()),
              ElementsAre("scale", "steps", "fc.weight", "fc.bias",
                          "head.1.weight", "head.1.bias"));
  std::vector<std::string> children;
  for (const auto& [name, child] : net->NamedChildren()) {
    children.push_back(name + ":" + std::string(child->type_name()));
  }
  EXPECT_THAT(children, ElementsAre("fc:Linear", "head:Sequential"));
  EXPECT_EQ(net->NumParameters(), 2 + 6 + 2 + 2 + 1);
  EXPECT_EQ(net->ToString(),
            "Net(\n"
            "  (fc): Linear(in_features=3, out_features=2, bias=True)\n"
            "  (head): Sequential(\n"
            "    (0): ReLU()\n"
            "    (1): Linear(in_features=2, out_features=1, bias=True)\n"
            "  )\n"
            ")");
}

TEST(ModuleTest, ParametersAreHandlesIntoTheModule) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  std::vector<Tensor> params = net->Parameters();
  ASSERT_EQ(params.size(), 5u);
  EXPECT_TRUE(params[1].SharesStorageWith(net->fc()->weight()));
  EXPECT_EQ(params[1].raw_data(), net->fc()->weight().raw_data());
  for (const Tensor& p : params) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  // Writing through the handle changes the module.
  TANDEM_NN_ASSERT_OK(FillInPlace(params[1], 0.25));
  EXPECT_THAT(Floats(net->fc()->weight()),
              ElementsAre(0.25, 0.25, 0.25, 0.25, 0.25, 0.25));
}

TEST(ModuleTest, TrainEvalRecurse) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  EXPECT_TRUE(net->is_training());
  net->Eval();
  EXPECT_FALSE(net->is_training());
  for (const auto& [name, child] : net->NamedChildren()) {
    EXPECT_FALSE(child->is_training()) << name;
  }
  auto* head = dynamic_cast<Sequential*>(net->NamedChildren()[1].second);
  ASSERT_NE(head, nullptr);
  EXPECT_FALSE(head->at(1)->is_training());
  net->Train();
  EXPECT_TRUE(head->at(1)->is_training());
}

TEST(ModuleTest, ReplaceChildSwapsInPlaceWhereSupported) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  auto* head = dynamic_cast<Sequential*>(net->NamedChildren()[1].second);
  ASSERT_NE(head, nullptr);
  head->Eval();
  Module* old_linear = head->at(1);
  auto relu = std::make_unique<ReLU>();
  Module* new_relu = relu.get();
  absl::StatusOr<std::unique_ptr<Module>> old =
      head->ReplaceChild("1", std::move(relu));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->get(), old_linear);  // handed back to the caller
  EXPECT_EQ(head->at(1), new_relu);   // Sequential's list follows
  EXPECT_EQ(head->NamedChildren()[1].first, "1");
  EXPECT_EQ(head->NamedChildren()[1].second, new_relu);
  EXPECT_FALSE(new_relu->is_training());  // the parent's mode
  EXPECT_EQ(head->ReplaceChild("9", std::make_unique<ReLU>()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(head->ReplaceChild("1", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Net keeps its own pointer (fc_) and does not support replacing.
  EXPECT_EQ(net->ReplaceChild("fc", std::make_unique<ReLU>()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(head->at(1), new_relu);
}

// Sequential::SetLayerCall: every layer runs through the call (which sees
// its index and input), in order; clearing it restores plain calls.
TEST(ModuleTest, SequentialLayerCallWrapsEveryLayer) {
  Sequential seq;
  ASSERT_TRUE(seq.Append(std::make_unique<ReLU>()).ok());
  ASSERT_TRUE(seq.Append(std::make_unique<ReLU>()).ok());
  std::vector<int64_t> seen;
  seq.SetLayerCall([&seen](int64_t i, Module& layer,
                           const Tensor& x) -> absl::StatusOr<Tensor> {
    seen.push_back(i);
    TANDEM_ASSIGN_OR_RETURN(Tensor y, layer.Forward(x));
    return Mul(y, 2.0);
  });
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x,
                                 Tensor::FromVector<float>({-1.0f, 3.0f}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, seq.Forward(x));
  EXPECT_THAT(seen, ElementsAre(0, 1));
  EXPECT_THAT(Floats(y), ElementsAre(0.0f, 12.0f));  // relu, *2, relu, *2
  seq.SetLayerCall(nullptr);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(y, seq.Forward(x));
  EXPECT_THAT(Floats(y), ElementsAre(0.0f, 3.0f));
  EXPECT_EQ(seen.size(), 2u);
}

TEST(ModuleTest, RegistrationErrors) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Ones({2}));

  absl::Status s = net->RegisterParameter("fc", t);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("submodule with that name"));
  s = net->RegisterBuffer("scale", t);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  s = net->RegisterParameter("a.b", t);
  EXPECT_THAT(s.message(), HasSubstr("contains '.'"));
  EXPECT_FALSE(net->RegisterParameter("", t).ok());
  EXPECT_FALSE(net->RegisterParameter("undefined", Tensor()).ok());

  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor ints, Tensor::Zeros({2}, DType::kI64));
  s = net->RegisterParameter("ints", ints);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("i64"), HasSubstr("RegisterBuffer")));

  TANDEM_NN_ASSERT_OK(t.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor derived, Mul(t, 2.0));
  s = net->RegisterParameter("derived", derived);
  EXPECT_THAT(s.message(), HasSubstr("not a leaf"));

  absl::StatusOr<Module*> child =
      net->RegisterModule("nothing", std::unique_ptr<Module>());
  EXPECT_FALSE(child.ok());

  // None of the failures registered anything.
  EXPECT_EQ(net->NamedParameters().size(), 5u);
  EXPECT_EQ(net->NamedBuffers().size(), 1u);
}

TEST(ModuleTest, StateDictRoundTrip) {
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  // StateDict aliases the module: clone it to keep a snapshot.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(StateDict saved,
                                 CloneStateDict(net->StateDict()));
  ASSERT_EQ(saved.size(), 6u);
  EXPECT_FALSE(saved[2].tensor.SharesStorageWith(net->fc()->weight()));
  EXPECT_FALSE(saved[2].tensor.requires_grad());
  const std::vector<float> original = Floats(net->fc()->weight());

  // A second module from another seed differs, then loads the snapshot.
  Generator other_gen(2);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> other,
                                 Net::Create(other_gen));
  EXPECT_NE(Floats(other->fc()->weight()), original);
  void* storage_before = other->fc()->weight().raw_data();
  TANDEM_NN_ASSERT_OK(other->LoadStateDict(saved));
  EXPECT_EQ(Floats(other->fc()->weight()), original);
  // Loaded in place: handles (optimizers, DDP views) stay valid.
  EXPECT_EQ(other->fc()->weight().raw_data(), storage_before);
  const StateDict a = net->StateDict();
  const StateDict b = other->StateDict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].tensor.dtype(), b[i].tensor.dtype());
    if (a[i].tensor.dtype() == DType::kF32) {
      EXPECT_EQ(Floats(a[i].tensor), Floats(b[i].tensor)) << a[i].name;
    }
  }

  // Same outputs.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor x, Tensor::FromVector<float>({1, -2, 0.5, 3, 0, -1}, {2, 3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor ya, net->Forward(x));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor yb, other->Forward(x));
  EXPECT_EQ(Floats(ya), Floats(yb));
}

TEST(ModuleTest, StateDictAliasesTheModule) {
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  StateDict live = net->StateDict();
  EXPECT_TRUE(live[2].tensor.SharesStorageWith(net->fc()->weight()));
  EXPECT_FALSE(live[2].tensor.requires_grad());  // detached, like PyTorch
}

TEST(ModuleTest, LoadStateDictShapeMismatchIsClearAndLoadsNothing) {
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(StateDict state,
                                 CloneStateDict(net->StateDict()));
  // Change every value, and give fc.weight the wrong shape.
  for (NamedTensor& e : state) {
    if (e.tensor.dtype() == DType::kF32) {
      TANDEM_NN_ASSERT_OK(FillInPlace(e.tensor, 7.0));
    }
  }
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(state[2].tensor, Tensor::Zeros({4, 3}));
  const std::vector<float> before = Floats(net->fc()->bias());

  absl::Status s = net->LoadStateDict(state);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("Net"), HasSubstr("\"fc.weight\""),
                                 HasSubstr("the state dict has [4, 3] f32"),
                                 HasSubstr("the module has [2, 3] f32"),
                                 HasSubstr("Nothing was loaded")));
  // fc.bias was fine but must not have been loaded either.
  EXPECT_EQ(Floats(net->fc()->bias()), before);
}

TEST(ModuleTest, LoadStateDictMissingUnexpectedAndDtype) {
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(StateDict state,
                                 CloneStateDict(net->StateDict()));
  state.erase(state.begin() + 4);  // head.1.weight
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor extra, Tensor::Zeros({1}));
  state.push_back({"head.2.weight", extra});
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(state[0].tensor,
                                 Tensor::Ones({2}, DType::kF64));  // scale

  absl::Status s = net->LoadStateDict(state);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("missing key(s): \"head.1.weight\""),
                    HasSubstr("unexpected key(s): \"head.2.weight\""),
                    HasSubstr("\"scale\": the state dict has [2] f64, the "
                              "module has [2] f32")));

  // Non-strict ignores only the unexpected key.
  s = net->LoadStateDict(state, /*strict=*/false);
  EXPECT_THAT(s.message(), HasSubstr("missing key(s)"));
  EXPECT_THAT(s.message(), testing::Not(HasSubstr("unexpected")));

  // With the missing key restored and the dtype fixed, non-strict loads.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(StateDict good,
                                 CloneStateDict(net->StateDict()));
  good.push_back({"head.2.weight", extra});
  EXPECT_FALSE(net->LoadStateDict(good).ok());
  TANDEM_NN_ASSERT_OK(net->LoadStateDict(good, /*strict=*/false));
}

TEST(ModuleTest, ZeroGradKeepsOrDropsGradients) {
  Generator gen(1);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor x, Tensor::FromVector<float>({1, -2, 0.5, 3, 0, -1}, {2, 3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, net->Forward(x));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(y));
  TANDEM_NN_ASSERT_OK(loss.Backward());
  const Tensor& w = net->fc()->weight();
  ASSERT_TRUE(w.has_grad());
  Tensor grad = w.grad();
  void* grad_storage = grad.raw_data();

  net->ZeroGrad();  // in place, like zero_grad(set_to_none=False)
  ASSERT_TRUE(w.has_grad());
  EXPECT_EQ(w.grad().raw_data(), grad_storage);
  EXPECT_THAT(Floats(w.grad()), ElementsAre(0, 0, 0, 0, 0, 0));

  net->ZeroGrad(/*set_to_none=*/true);
  EXPECT_FALSE(w.has_grad());
}

// This test links no device library: CUDA has no allocator, so To fails
// with a message that says so and leaves the module on the CPU. The moves
// themselves are tested in module_to_test.cc on the fake device.
TEST(ModuleTest, ToAnUnavailableDeviceFailsAndMovesNothing) {
  Generator gen(0);
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Net> net, Net::Create(gen));
  const std::vector<float> weight = Floats(net->fc()->weight());
  const absl::Status s = net->To(Device::CUDA(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("Net.To(cuda:0): moving parameter \"scale\""),
                    HasSubstr("no allocator is registered for cuda:0"),
                    HasSubstr("Nothing was moved")));
  for (const Tensor& p : net->Parameters())
    EXPECT_EQ(p.device(), Device::CPU());
  EXPECT_EQ(Floats(net->fc()->weight()), weight);
  TANDEM_NN_ASSERT_OK(net->To(Device::CPU()));  // already there: a no-op
}

}  // namespace
}  // namespace tandem::nn
