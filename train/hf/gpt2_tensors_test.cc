#include "train/hf/gpt2_tensors.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/tensor.h"

namespace tandem::train::hf {
namespace {

using ::testing::HasSubstr;

// A GPT-2 state dict in tandem's layout (Linear [out, in]) for V=10, P=6,
// C=4, two blocks; element k of the j-th tensor is j + k / 64 (exact in
// f16).
nn::StateDict TinyState() {
  const int64_t v = 10, p = 6, c = 4;
  std::vector<std::pair<std::string, Shape>> specs = {
      {"transformer.wte.weight", {v, c}}, {"transformer.wpe.weight", {p, c}}};
  for (int i = 0; i < 2; ++i) {
    const std::string h = absl::StrCat("transformer.h.", i, ".");
    specs.push_back({h + "ln_1.weight", {c}});
    specs.push_back({h + "ln_1.bias", {c}});
    specs.push_back({h + "attn.c_attn.weight", {3 * c, c}});
    specs.push_back({h + "attn.c_attn.bias", {3 * c}});
    specs.push_back({h + "attn.c_proj.weight", {c, c}});
    specs.push_back({h + "attn.c_proj.bias", {c}});
    specs.push_back({h + "ln_2.weight", {c}});
    specs.push_back({h + "ln_2.bias", {c}});
    specs.push_back({h + "mlp.c_fc.weight", {4 * c, c}});
    specs.push_back({h + "mlp.c_fc.bias", {4 * c}});
    specs.push_back({h + "mlp.c_proj.weight", {c, 4 * c}});
    specs.push_back({h + "mlp.c_proj.bias", {c}});
  }
  specs.push_back({"transformer.ln_f.weight", {c}});
  specs.push_back({"transformer.ln_f.bias", {c}});
  nn::StateDict state;
  for (size_t j = 0; j < specs.size(); ++j) {
    int64_t n = 1;
    for (int64_t d : specs[j].second) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
      values[k] = static_cast<float>(j) + static_cast<float>(k) / 64;
    state.push_back(
        {specs[j].first, *Tensor::FromVector(values, specs[j].second)});
  }
  return state;
}

const nn::NamedTensor& Find(const nn::StateDict& s, const std::string& name) {
  for (const nn::NamedTensor& e : s) {
    if (e.name == name) return e;
  }
  static const nn::NamedTensor kNone;
  ADD_FAILURE() << "no " << name;
  return kNone;
}

TEST(Gpt2TensorsTest, ConvOneDWeightsAreTheFourProjections) {
  EXPECT_TRUE(IsConv1dWeight("transformer.h.0.attn.c_attn.weight"));
  EXPECT_TRUE(IsConv1dWeight("transformer.h.11.attn.c_proj.weight"));
  EXPECT_TRUE(IsConv1dWeight("transformer.h.3.mlp.c_fc.weight"));
  EXPECT_TRUE(IsConv1dWeight("transformer.h.3.mlp.c_proj.weight"));
  EXPECT_FALSE(IsConv1dWeight("transformer.h.3.mlp.c_proj.bias"));
  EXPECT_FALSE(IsConv1dWeight("transformer.wte.weight"));
  EXPECT_FALSE(IsConv1dWeight("transformer.h.x.mlp.c_fc.weight"));
}

TEST(Gpt2TensorsTest, ExportTransposesTheProjectionsOnly) {
  const nn::StateDict state = TinyState();
  absl::StatusOr<nn::StateDict> hf = ToHfGpt2(state);
  ASSERT_TRUE(hf.ok()) << hf.status();
  ASSERT_EQ(hf->size(), state.size());
  for (size_t j = 0; j < state.size(); ++j) {
    EXPECT_EQ((*hf)[j].name, state[j].name);  // same names, same order
  }
  // c_attn: tandem [12, 4] -> HF [4, 12], hf[i][o] == tandem[o][i].
  const Tensor& w = Find(*hf, "transformer.h.1.attn.c_attn.weight").tensor;
  const Tensor& t = Find(state, "transformer.h.1.attn.c_attn.weight").tensor;
  ASSERT_EQ(w.shape(), (Shape{4, 12}));
  const float* hw = w.data<float>();
  const float* tw = t.data<float>();
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t o = 0; o < 12; ++o) EXPECT_EQ(hw[i * 12 + o], tw[o * 4 + i]);
  }
  EXPECT_EQ(Find(*hf, "transformer.h.0.mlp.c_proj.weight").tensor.shape(),
            (Shape{16, 4}));
  // Others are the same values.
  EXPECT_EQ(*Find(*hf, "transformer.wte.weight").tensor.ToVector<float>(),
            *Find(state, "transformer.wte.weight").tensor.ToVector<float>());
}

TEST(Gpt2TensorsTest, ExportRefusesANameGpt2DoesNotHave) {
  nn::StateDict state = TinyState();
  state.push_back({"transformer.h.0.attn.mask", *Tensor::Zeros({2})});
  absl::StatusOr<nn::StateDict> hf = ToHfGpt2(state);
  ASSERT_FALSE(hf.ok());
  EXPECT_THAT(std::string(hf.status().message()),
              HasSubstr("\"transformer.h.0.attn.mask\" is not a parameter of "
                        "GPT2LMHeadModel"));
}

void ExpectEqualStates(const nn::StateDict& a, const nn::StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t j = 0; j < a.size(); ++j) {
    EXPECT_EQ(a[j].name, b[j].name);
    EXPECT_EQ(a[j].tensor.shape(), b[j].tensor.shape()) << a[j].name;
    EXPECT_EQ(*a[j].tensor.ToVector<float>(), *b[j].tensor.ToVector<float>())
        << a[j].name;
  }
}

TEST(Gpt2TensorsTest, ImportInvertsExport) {
  const nn::StateDict state = TinyState();
  absl::StatusOr<nn::StateDict> back =
      FromHfGpt2(*ToHfGpt2(state), state, "x.safetensors");
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectEqualStates(*back, state);
}

// The hub's older files: no "transformer." prefix, the attention buffers
// present, lm_head saved as a copy of wte, f16.
TEST(Gpt2TensorsTest, ImportAcceptsHubForms) {
  const nn::StateDict state = TinyState();
  const nn::StateDict hf = *ToHfGpt2(state);
  nn::StateDict file;
  for (const nn::NamedTensor& e : hf) {
    file.push_back({e.name.substr(std::string("transformer.").size()),
                    *e.tensor.To(DType::kF16)});
  }
  file.push_back({"h.0.attn.bias", *Tensor::Ones({1, 1, 6, 6})});
  file.push_back({"h.1.attn.masked_bias", *Tensor::Ones({})});
  Tensor head = *Find(file, "wte.weight").tensor.Clone();
  file.push_back({"lm_head.weight", head});
  absl::StatusOr<nn::StateDict> back = FromHfGpt2(file, state, "hub");
  ASSERT_TRUE(back.ok()) << back.status();
  // The tiny state's values are exact in f16.
  ExpectEqualStates(*back, state);
}

TEST(Gpt2TensorsTest, EveryProblemNamesTheKeyTheShapesAndTheFile) {
  const nn::StateDict state = TinyState();
  nn::StateDict file = *ToHfGpt2(state);
  // Missing: drop ln_f.bias. Wrong shape: c_fc given in tandem's layout.
  // Unexpected: an extra key.
  nn::StateDict damaged;
  for (nn::NamedTensor& e : file) {
    if (e.name == "transformer.ln_f.bias") continue;
    if (e.name == "transformer.h.1.mlp.c_fc.weight") {
      e.tensor = *Tensor::Zeros({16, 4});
    }
    damaged.push_back(e);
  }
  damaged.push_back({"transformer.h.2.ln_1.weight", *Tensor::Zeros({4})});
  absl::StatusOr<nn::StateDict> r = FromHfGpt2(damaged, state, "/d/m.st");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(r.status().message());
  EXPECT_THAT(m, HasSubstr("Hugging Face GPT-2 file /d/m.st does not fit"));
  EXPECT_THAT(m, HasSubstr("missing key \"transformer.ln_f.bias\" (the "
                           "model's [4])"));
  EXPECT_THAT(m, HasSubstr("key \"transformer.h.1.mlp.c_fc.weight\" has shape "
                           "[16, 4], the model expects [4, 16] (GPT-2's "
                           "Conv1D layout [in, out])"));
  EXPECT_THAT(m, HasSubstr("unexpected key \"transformer.h.2.ln_1.weight\" "
                           "([4])"));
}

// Imports the export of TinyState() with the tensor `name` replaced by `t`.
absl::StatusOr<nn::StateDict> ImportReplacing(const std::string& name,
                                              const Tensor& t) {
  const nn::StateDict state = TinyState();
  nn::StateDict file = *ToHfGpt2(state);
  for (nn::NamedTensor& e : file) {
    if (e.name == name) e.tensor = t;
  }
  return FromHfGpt2(file, state, "f");
}

TEST(Gpt2TensorsTest, WrongShapeOfAPlainTensorNamesBothShapes) {
  absl::StatusOr<nn::StateDict> r =
      ImportReplacing("transformer.wpe.weight", *Tensor::Zeros({8, 4}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("key \"transformer.wpe.weight\" has shape [8, 4], the "
                        "model expects [6, 4]"));
}

TEST(Gpt2TensorsTest, AnUntiedHeadOrATwiceGivenKeyIsRefused) {
  const nn::StateDict state = TinyState();
  nn::StateDict file = *ToHfGpt2(state);
  file.push_back({"lm_head.weight", *Tensor::Zeros({10, 4})});
  file.push_back({"ln_f.bias", *Tensor::Zeros({4})});
  absl::StatusOr<nn::StateDict> r = FromHfGpt2(file, state, "f");
  ASSERT_FALSE(r.ok());
  const std::string m(r.status().message());
  EXPECT_THAT(m, HasSubstr("\"lm_head.weight\" ([10, 4]) differs from the "
                           "token embedding \"transformer.wte.weight\""));
  EXPECT_THAT(m, HasSubstr("\"transformer.ln_f.bias\" and \"ln_f.bias\" are "
                           "the same tensor, given twice"));
}

TEST(Gpt2TensorsTest, IntegerTensorsAreRefused) {
  absl::StatusOr<nn::StateDict> r = ImportReplacing(
      "transformer.ln_f.weight", *Tensor::Zeros({4}, DType::kI64));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("key \"transformer.ln_f.weight\" is i64, expected a "
                        "floating-point tensor"));
}

}  // namespace
}  // namespace tandem::train::hf
