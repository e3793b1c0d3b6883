#include "train/parallel/devices/device_transfer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/sim_device/sim_device.h"

namespace tandem::train {
namespace {

// torch.chunk(torch.arange(rows), chunks) sizes.
TEST(ChunkSizesTest, FollowsTorchChunk) {
  EXPECT_EQ(ChunkSizes(5, 4).value(), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(ChunkSizes(6, 4).value(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(ChunkSizes(7, 2).value(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(ChunkSizes(3, 5).value(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(ChunkSizes(8, 1).value(), (std::vector<int64_t>{8}));
  EXPECT_TRUE(ChunkSizes(0, 3).value().empty());
  EXPECT_EQ(ChunkSizes(4, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Chunk on sim:0, move a piece to sim:1, gather on sim:0: the values come
// back in order and the gradient of the input is the gradient of the gather
// (the identity), moved back the same way.
// torch.tensor_split's rule (checked against PyTorch 1.13: tensor_split of
// 5, 7, 8 and 9 rows into 4, 3, 8 and 4 sections).
TEST(TensorSplitSizesTest, FollowsTorchTensorSplit) {
  EXPECT_EQ(TensorSplitSizes(5, 4).value(), (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(TensorSplitSizes(7, 3).value(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(TensorSplitSizes(8, 8).value(), (std::vector<int64_t>(8, 1)));
  EXPECT_EQ(TensorSplitSizes(9, 4).value(), (std::vector<int64_t>{3, 2, 2, 2}));
  EXPECT_EQ(TensorSplitSizes(4, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SplitRowsTest, ViewsThePiecesAndChecksTheTotal) {
  Tensor x =
      Tensor::FromVector(std::vector<float>{0, 1, 2, 3, 4, 5}, {3, 2}).value();
  std::vector<Tensor> parts = SplitRows(x, {2, 1}).value();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].ToVector<float>().value(), (std::vector<float>{4, 5}));
  absl::Status short_split = SplitRows(x, {1, 1}).status();
  EXPECT_EQ(short_split.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_split.message().find("must cover its 3 rows"),
            std::string::npos)
      << short_split;
}

TEST(DeviceTransferTest, RoundTripWithGradients) {
  TANDEM_NN_ASSERT_OK(InstallSimDevices(2));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor host, Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, host.To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> parts, ChunkRows(x, 2));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape(), (Shape{1, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor moved,
                                 CopyToDevice(parts[1], Device::Sim(1)));
  EXPECT_EQ(moved.device(), Device::Sim(1));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor same,
                                 CopyToDevice(parts[0], Device::Sim(0)));
  EXPECT_TRUE(same.SharesStorageWith(x));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y,
                                 GatherRows({same, moved}, Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor weights, Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(weights, weights.To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor prod, Mul(y, weights));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(prod));
  TANDEM_NN_ASSERT_OK(loss.Backward());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor yh, y.To(Device::CPU()));
  EXPECT_EQ(yh.ToVector<float>().value(),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor g, x.grad().To(Device::CPU()));
  EXPECT_EQ(g.ToVector<float>().value(),
            (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(DeviceTransferTest, GatherNamesTheMismatchedPiece) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Zeros({2, 3}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, Tensor::Zeros({2, 4}));
  absl::Status s = GatherRows({a, b}, Device::CPU()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("piece 1 is f32[2, 4] on cpu but piece 0 is "
                             "f32[2, 3] on cpu"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace tandem::train
