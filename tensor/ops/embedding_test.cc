// Embedding (tensor/ops/embedding.cc): values and the dense weight gradient
// against PyTorch 1.13, i32 and i64 indices of any shape, GradCheck, and the
// argument checks (dtype, shape, an index out of range named with its
// position and V).
//
// The numbers were printed by /usr/bin/python3 (torch 1.13):
//   w = torch.arange(15, dtype=torch.float64).reshape(5, 3) * 0.25 - 1
//   w.requires_grad_(True)
//   idx = torch.tensor([[0, 2, 4], [2, 2, 1]])
//   y = torch.nn.functional.embedding(idx, w)
//   gy = torch.arange(18, dtype=torch.float64).reshape(2, 3, 3) * 0.5 + 0.125
//   (y * gy).sum().backward(); print(w.grad.flatten().tolist())
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tensor/dispatch/op_table.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "tensor/testing/gradcheck.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

const std::vector<double> kGradW = {0.125, 0.625,  1.125,  7.625,  8.125,
                                    8.625, 12.375, 13.875, 15.375, 0.0,
                                    0.0,   0.0,    3.125,  3.625,  4.125};

std::vector<double> Arange(int64_t n, double scale, double shift) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i) * scale + shift;
  return v;
}

template <typename I>
void CheckAgainstTorch(DType dtype) {
  SCOPED_TRACE(DTypeName(dtype));
  Tensor w = Tensor::FromVector(Arange(15, 0.25, -1), {5, 3})
                 .value()
                 .To(dtype)
                 .value();
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  Tensor idx =
      Tensor::FromVector(std::vector<I>{0, 2, 4, 2, 2, 1}, {2, 3}).value();
  absl::StatusOr<Tensor> y = Embedding(idx, w);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(y->dtype(), dtype);
  // Row idx[i] of w, exactly.
  const std::vector<double> wv = Arange(15, 0.25, -1);
  const std::vector<int64_t> rows = {0, 2, 4, 2, 2, 1};
  std::vector<double> yv =
      y->To(DType::kF64).value().ToVector<double>().value();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(yv[i * 3 + k], wv[rows[i] * 3 + k]) << i << "," << k;
    }
  }
  Tensor gy = Tensor::FromVector(Arange(18, 0.5, 0.125), {2, 3, 3})
                  .value()
                  .To(dtype)
                  .value();
  ASSERT_TRUE(Sum(Mul(*y, gy).value()).value().Backward().ok());
  // Sums of a few multiples of 1/8: exact in f32 and f64.
  EXPECT_EQ(w.grad().To(DType::kF64).value().ToVector<double>().value(),
            kGradW);
}

TEST(EmbeddingTest, MatchesPyTorch) {
  CheckAgainstTorch<int64_t>(DType::kF64);
  CheckAgainstTorch<int64_t>(DType::kF32);
  CheckAgainstTorch<int32_t>(DType::kF64);
  CheckAgainstTorch<int32_t>(DType::kF32);
}

TEST(EmbeddingTest, ScalarIndexAndEmpty) {
  Tensor w = Tensor::FromVector(Arange(6, 1, 0), {3, 2})
                 .value()
                 .To(DType::kF64)
                 .value();
  Tensor y =
      Embedding(Tensor::FromVector(std::vector<int64_t>{2}, {}).value(), w)
          .value();
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y.ToVector<double>().value(), (std::vector<double>{4, 5}));
  Tensor none =
      Embedding(Tensor::Zeros({0, 4}, DType::kI64).value(), w).value();
  EXPECT_EQ(none.shape(), (Shape{0, 4, 2}));
}

TEST(EmbeddingTest, LowPrecisionWeightGathersExactly) {
  Tensor w = Tensor::FromVector(Arange(6, 0.3, -1), {3, 2})
                 .value()
                 .To(DType::kBF16)
                 .value();
  Tensor y =
      Embedding(Tensor::FromVector(std::vector<int64_t>{1, 0}).value(), w)
          .value();
  EXPECT_EQ(y.dtype(), DType::kBF16);
  std::vector<float> wf = w.To(DType::kF32).value().ToVector<float>().value();
  EXPECT_EQ(y.To(DType::kF32).value().ToVector<float>().value(),
            (std::vector<float>{wf[2], wf[3], wf[0], wf[1]}));
}

TEST(EmbeddingTest, GradCheck) {
  std::mt19937 rng(5);
  Tensor w = RandomTensor({6, 4}, rng);
  Tensor idx =
      Tensor::FromVector(std::vector<int64_t>{5, 0, 5, 3, 3, 3, 1}).value();
  absl::Status s = GradCheck(
      [&](const std::vector<Tensor>& in) { return Embedding(idx, in[0]); },
      {w});
  EXPECT_TRUE(s.ok()) << s;
}

TEST(EmbeddingTest, RefusesBadArguments) {
  Tensor w = Tensor::Zeros({5, 3}, DType::kF32).value();
  absl::StatusOr<Tensor> r = Embedding(
      Tensor::FromVector(std::vector<int64_t>{0, 1, 2, 3, 7, 1}, {2, 3})
          .value(),
      w);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("index out of range in self: indices[1, 1] = 7 is not "
                        "in [0, 5)"));
  r = Embedding(Tensor::FromVector(std::vector<int32_t>{-1}).value(), w);
  EXPECT_THAT(r.status().message(), HasSubstr("indices[0] = -1"));
  r = Embedding(Tensor::Zeros({2}, DType::kF32).value(), w);
  EXPECT_THAT(r.status().message(),
              HasSubstr("indices must be i64 or i32 (PyTorch's Long or Int), "
                        "got f32[2]"));
  r = Embedding(Tensor::Zeros({2}, DType::kI64).value(),
                Tensor::Zeros({5}, DType::kF32).value());
  EXPECT_THAT(r.status().message(),
              HasSubstr("weight must be [num_embeddings, embedding_dim], got "
                        "f32[5]"));
  r = Embedding(Tensor(), w);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(internal::DescribeKernelTable(),
              ::testing::IsSupersetOf({HasSubstr("Embedding: cpu"),
                                       HasSubstr("EmbeddingBackward: cpu")}));
}

}  // namespace
}  // namespace tandem
