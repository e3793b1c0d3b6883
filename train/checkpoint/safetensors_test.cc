#include "train/checkpoint/safetensors.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/tensor.h"
#include "train/checkpoint/atomic_file.h"

namespace tandem::train::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string TestDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_EQ(
      std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()),
      0);
  return dir;
}

std::string Bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()),
                     static_cast<size_t>(t.nbytes()));
}

// 2 -> 3 -> ReLU -> 3 -> 2, initialised from `seed`: "0.weight", "0.bias",
// "2.weight", "2.bias".
std::unique_ptr<nn::Sequential> Model(uint64_t seed, int64_t hidden = 3) {
  Generator gen(seed);
  auto m = std::make_unique<nn::Sequential>();
  EXPECT_TRUE(m->Append(nn::Linear::Create(2, hidden, gen)).ok());
  EXPECT_TRUE(m->Append(std::make_unique<nn::ReLU>()).ok());
  EXPECT_TRUE(m->Append(nn::Linear::Create(hidden, 2, gen)).ok());
  return m;
}

// Every parameter's bytes, in order.
std::vector<std::string> Snapshot(const nn::Module& m) {
  std::vector<std::string> out;
  for (const nn::NamedTensor& nt : m.StateDict()) {
    out.push_back(nt.name + "=" + Bytes(nt.tensor));
  }
  return out;
}

TEST(SafetensorsTest, ExactLayout) {
  nn::StateDict state = {{"a", *Tensor::FromVector<float>({1.f, 2.f})}};
  absl::StatusOr<std::string> bytes = EncodeSafetensors(state, {{"k", "v"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],)"
      R"("data_offsets":[0,8]}})";
  const std::string padded =
      header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string expected(8, '\0');
  expected[0] = static_cast<char>(padded.size());
  expected += padded;
  const float values[2] = {1.f, 2.f};
  expected.append(reinterpret_cast<const char*>(values), 8);
  EXPECT_EQ(*bytes, expected);
  EXPECT_EQ(padded.size() % 8, 0u);
}

TEST(SafetensorsTest, EveryDTypeRoundTripsBitForBit) {
  nn::StateDict state = {
      {"f32", *Tensor::FromVector<float>({1.5f, -0.f, 3e-41f}, {3, 1})},
      {"f64", *Tensor::FromVector<double>({1.0 / 3.0})},
      {"f16", *Tensor::FromVector<Half>({Half(0.1f), Half(-2.f)})},
      {"bf16", *Tensor::FromVector<BFloat16>({BFloat16(0.1f)}, {1, 1, 1})},
      {"i64", *Tensor::FromVector<int64_t>({INT64_MIN, 7})},
      {"i32", *Tensor::FromVector<int32_t>({-1, 2, 3, 4}, {2, 2})},
      {"scalar", *Tensor::Scalar(5.0)},
      {"empty", *Tensor::Zeros({0, 4})},
  };
  const std::string path = TestDir("dtypes") + "/t.safetensors";
  ASSERT_TRUE(SaveSafetensors(path, state, {{"format", "pt"}}).ok());
  absl::StatusOr<SafetensorsContent> back = LoadSafetensors(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata, (Metadata{{"format", "pt"}}));
  ASSERT_EQ(back->tensors.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    SCOPED_TRACE(state[i].name);
    EXPECT_EQ(back->tensors[i].name, state[i].name);
    EXPECT_EQ(back->tensors[i].tensor.dtype(), state[i].tensor.dtype());
    EXPECT_EQ(back->tensors[i].tensor.shape(), state[i].tensor.shape());
    EXPECT_EQ(Bytes(back->tensors[i].tensor), Bytes(state[i].tensor));
  }
}

TEST(SafetensorsTest, ModuleRoundTripsWithPyTorchNames) {
  auto saved = Model(1);
  auto loaded = Model(2);
  ASSERT_NE(Snapshot(*saved), Snapshot(*loaded));
  const std::string path = TestDir("module") + "/model.safetensors";
  ASSERT_TRUE(SaveSafetensors(path, saved->StateDict()).ok());
  absl::StatusOr<SafetensorsContent> content = LoadSafetensors(path);
  ASSERT_TRUE(content.ok());
  std::vector<std::string> names;
  for (const auto& nt : content->tensors) names.push_back(nt.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight",
                                             "2.bias"}));
  ASSERT_TRUE(LoadModuleFromSafetensors(path, *loaded).ok());
  EXPECT_EQ(Snapshot(*saved), Snapshot(*loaded));
}

TEST(SafetensorsTest, EncodeRejectsBadNames) {
  Tensor t = *Tensor::Zeros({1});
  EXPECT_FALSE(EncodeSafetensors({{"", t}}).ok());
  EXPECT_FALSE(EncodeSafetensors({{"__metadata__", t}}).ok());
  EXPECT_FALSE(EncodeSafetensors({{"a", t}, {"a", t}}).ok());
  EXPECT_FALSE(EncodeSafetensors({{"a", Tensor()}}).ok());
}

// A damaged file fails with a message naming the file (and the tensor
// where one is at fault) and leaves the model as it was.
class BadFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    good_ = *EncodeSafetensors(Model(1)->StateDict());
    model_ = Model(2);
    before_ = Snapshot(*model_);
  }
  // Writes `bytes`, loads it into the model, returns the error message.
  std::string LoadBytes(const std::string& bytes) {
    const std::string path = dir_ + "/bad.safetensors";
    EXPECT_TRUE(WriteFileAtomically(path, bytes).ok());
    absl::Status s = LoadModuleFromSafetensors(path, *model_);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(path));
    EXPECT_EQ(Snapshot(*model_), before_) << "the model changed";
    return std::string(s.message());
  }
  std::string LoadState(const nn::StateDict& state) {
    return LoadBytes(*EncodeSafetensors(state));
  }
  std::string dir_;
  std::string good_;
  std::unique_ptr<nn::Sequential> model_;
  std::vector<std::string> before_;
};

TEST_F(BadFileTest, TruncatedData) {
  EXPECT_THAT(LoadBytes(good_.substr(0, good_.size() - 1)),
              HasSubstr("\"2.bias\"'s data ends at byte"));
}

TEST_F(BadFileTest, TruncatedHeader) {
  EXPECT_THAT(LoadBytes(good_.substr(0, 20)), HasSubstr("truncated"));
  EXPECT_THAT(LoadBytes(good_.substr(0, 5)),
              HasSubstr("fewer than the 8-byte"));
}

TEST_F(BadFileTest, WrongHeader) {
  std::string bytes = good_;
  bytes[8] = 'x';
  EXPECT_THAT(LoadBytes(bytes), HasSubstr("does not start with '{'"));
  bytes = good_;
  bytes[bytes.find("\"shape\"") + 1] = 'S';
  EXPECT_THAT(LoadBytes(bytes),
              HasSubstr("tensor \"0.weight\" has no \"shape\""));
  EXPECT_THAT(LoadBytes("garbage garbage garbage"), HasSubstr("header length"));
}

TEST_F(BadFileTest, OffsetsThatDisagreeWithTheShape) {
  std::string bytes = good_;
  const size_t at = bytes.find("\"shape\":[3,2]");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 9] = '4';  // [4,2]: 32 bytes for a 24-byte range
  EXPECT_THAT(LoadBytes(bytes), HasSubstr("tensor \"0.weight\" (F32 [4, 2]) "
                                          "needs 32 bytes"));
}

TEST_F(BadFileTest, UnsupportedDType) {
  std::string bytes = good_;
  const size_t at = bytes.find("\"F32\"");
  bytes.replace(at, 5, "\"U8\" ");
  EXPECT_THAT(LoadBytes(bytes), HasSubstr("has dtype \"U8\""));
}

TEST_F(BadFileTest, WrongShape) {
  EXPECT_THAT(LoadState(Model(1, /*hidden=*/4)->StateDict()),
              HasSubstr("\"0.weight\""));
}

TEST_F(BadFileTest, WrongDType) {
  nn::StateDict state = Model(1)->StateDict();
  state[1].tensor = *state[1].tensor.To(DType::kF64);
  EXPECT_THAT(LoadState(state), HasSubstr("\"0.bias\""));
}

TEST_F(BadFileTest, MissingTensor) {
  nn::StateDict state = Model(1)->StateDict();
  state.pop_back();
  EXPECT_THAT(LoadState(state), HasSubstr("missing key(s): \"2.bias\""));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  auto m = Model(1);
  absl::Status s =
      LoadModuleFromSafetensors(TestDir("nofile") + "/none.safetensors", *m);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

}  // namespace
}  // namespace tandem::train::checkpoint
