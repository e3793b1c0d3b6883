// Permute (tensor/ops/permute.cc): values against PyTorch's
// x.permute(dims).contiguous(), any dtype, the gradient (GradCheck) and the
// argument checks.
//
// The expected values were printed by /usr/bin/python3 (torch 1.13):
//   torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1).flatten().tolist()
//   torch.arange(24).reshape(2, 3, 4).permute(1, 0, 2).flatten().tolist()
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

Tensor Arange24(DType dtype) {
  std::vector<int64_t> v(24);
  std::iota(v.begin(), v.end(), 0);
  Tensor t = Tensor::FromVector(v, {2, 3, 4}).value();
  if (dtype == DType::kI64) return t;
  Tensor out = Tensor::Empty({2, 3, 4}, dtype).value();
  for (int64_t i = 0; i < 24; ++i) out.data<float>()[i] = static_cast<float>(i);
  return out;
}

TEST(PermuteTest, ValuesEqualPyTorchsContiguousPermute) {
  const std::vector<int64_t> want_201 = {0,  4,  8,  12, 16, 20, 1,  5,
                                         9,  13, 17, 21, 2,  6,  10, 14,
                                         18, 22, 3,  7,  11, 15, 19, 23};
  const std::vector<int64_t> want_102 = {0, 1, 2,  3,  12, 13, 14, 15,
                                         4, 5, 6,  7,  16, 17, 18, 19,
                                         8, 9, 10, 11, 20, 21, 22, 23};
  Tensor x = Arange24(DType::kI64);
  Tensor a = Permute(x, {2, 0, 1}).value();
  EXPECT_EQ(a.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(a.ToVector<int64_t>().value(), want_201);
  Tensor b = Permute(x, {1, 0, -1}).value();  // inner dim kept: memcpy rows
  EXPECT_EQ(b.shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(b.ToVector<int64_t>().value(), want_102);
  Tensor f = Permute(Arange24(DType::kF32), {2, 0, 1}).value();
  std::vector<float> want_f(want_201.begin(), want_201.end());
  EXPECT_EQ(f.ToVector<float>().value(), want_f);
  // The identity and a 0-d tensor.
  EXPECT_EQ(Permute(x, {0, 1, 2}).value().ToVector<int64_t>().value(),
            x.ToVector<int64_t>().value());
  Tensor s = Tensor::Scalar(3.5).value();
  EXPECT_EQ(Permute(s, {}).value().Item().value(), 3.5);
}

TEST(PermuteTest, GradientIsThePermutationBack) {
  std::mt19937 rng(3);
  Tensor x = RandomTensor({2, 3, 4, 5}, rng);
  absl::Status s = GradCheck(
      [](const std::vector<Tensor>& in) {
        return Permute(in[0], {0, 2, 1, 3});
      },
      {x});
  EXPECT_TRUE(s.ok()) << s;
  s = GradCheck(
      [](const std::vector<Tensor>& in) {
        return Permute(in[0], {3, 1, 0, 2});
      },
      {x});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(PermuteTest, RefusesWhatIsNotAPermutation) {
  Tensor x = Arange24(DType::kF32);
  auto wrong_rank = Permute(x, {0, 1});
  ASSERT_FALSE(wrong_rank.ok());
  EXPECT_THAT(wrong_rank.status().message(),
              HasSubstr("expected a permutation of 0..2"));
  auto repeated = Permute(x, {0, 1, 1});
  ASSERT_FALSE(repeated.ok());
  EXPECT_THAT(repeated.status().message(), HasSubstr("repeats 1"));
  auto out_of_range = Permute(x, {0, 1, 3});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("has 3"));
}

}  // namespace
}  // namespace tandem
