#include "train/parallel/core/flat_buckets.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/device.h"
#include "tensor/tensor.h"
#include "tensor/testing/fake_device.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Each member's offset in its bucket's flat buffer, in layout order.
std::vector<int64_t> Offsets(const FlatBucket& bucket) {
  std::vector<int64_t> out;
  for (const FlatParamMember& m : bucket.group.members()) {
    out.push_back(m.offset);
  }
  return out;
}

Tensor Make(Shape shape, DType dtype = DType::kF32,
            Device device = Device::CPU()) {
  return Tensor::Full(shape, 1.5, dtype, device).value();
}

TEST(FlatBucketsTest, ReverseOrderFirstCapThenCap) {
  // f32: a 16 B, b 16 B, c 32 B, d 8 B. First cap 32, later caps 40.
  const std::vector<Tensor> t = {Make({4}), Make({2, 2}), Make({8}), Make({2})};
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(
      t, {.first_bucket_cap_bytes = 32, .bucket_cap_bytes = 40});
  ASSERT_TRUE(set.ok()) << set.status();
  // d opens bucket 0; c does not fit the first cap (8 + 32 > 32): bucket 1;
  // b does not fit bucket 1 (32 + 16 > 40): bucket 2, which a joins.
  ASSERT_EQ(set->buckets.size(), 3u);
  EXPECT_THAT(set->buckets[0].members, ElementsAre(3));
  EXPECT_THAT(set->buckets[1].members, ElementsAre(2));
  EXPECT_THAT(set->buckets[2].members, ElementsAre(1, 0));
  EXPECT_THAT(Offsets(set->buckets[2]), ElementsAre(0, 4));
  EXPECT_EQ(set->buckets[2].flat.numel(), 8);
  EXPECT_EQ(set->slots[0].bucket, 2);
  EXPECT_EQ(set->slots[0].offset, 4);
  EXPECT_EQ(set->slots[1].offset, 0);
  EXPECT_EQ(set->slots[3].bucket, 0);
}

TEST(FlatBucketsTest, ATensorOverTheCapGetsABucketOfItsOwn) {
  const std::vector<Tensor> t = {Make({1}), Make({100}), Make({1})};
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(
      t, {.first_bucket_cap_bytes = 16, .bucket_cap_bytes = 16});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->buckets.size(), 3u);
  EXPECT_THAT(set->buckets[1].members, ElementsAre(1));
  EXPECT_EQ(set->buckets[1].flat.numel(), 100);
}

TEST(FlatBucketsTest, PaddingRoundsEachFlatUpWithZerosNoSlotViews) {
  // 7 + 3 elements in one bucket, padded to a multiple of 4: 12.
  const std::vector<Tensor> t = {Make({7}), Make({3})};
  absl::StatusOr<FlatBucketSet> set =
      MakeFlatBuckets(t, {.first_bucket_cap_bytes = 1024,
                          .bucket_cap_bytes = 1024,
                          .pad_to_multiple = 4});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->buckets.size(), 1u);
  EXPECT_EQ(set->buckets[0].flat.numel(), 12);
  EXPECT_THAT(Offsets(set->buckets[0]), ElementsAre(0, 3));
  EXPECT_THAT(*set->buckets[0].flat.View(10, {2})->ToVector<float>(),
              ElementsAre(0, 0));
  set = MakeFlatBuckets(t, {.pad_to_multiple = 0});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("pad_to_multiple must be"));
}

TEST(FlatBucketsTest, OneOpenBucketPerDtypeNumberedInOpeningOrder) {
  const std::vector<Tensor> t = {Make({2}, DType::kF64), Make({2}),
                                 Make({2}, DType::kF64), Make({2})};
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(t, {});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->buckets.size(), 2u);
  EXPECT_EQ(set->buckets[0].group.dtype(), DType::kF32);  // t[3] opens it
  EXPECT_THAT(set->buckets[0].members, ElementsAre(3, 1));
  EXPECT_EQ(set->buckets[1].group.dtype(), DType::kF64);
  EXPECT_THAT(set->buckets[1].members, ElementsAre(2, 0));
  EXPECT_EQ(set->buckets[1].flat.dtype(), DType::kF64);
}

TEST(FlatBucketsTest, OneOpenBucketPerDeviceAndFlatsLiveThere) {
  FakeDevice::Install();  // host-backed "CUDA" memory
  const std::vector<Tensor> t = {Make({2}, DType::kF32, Device::CUDA(0)),
                                 Make({2}),
                                 Make({3}, DType::kF32, Device::CUDA(0))};
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(t, {});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->buckets.size(), 2u);
  EXPECT_EQ(set->buckets[0].group.device(), Device::CUDA(0));
  EXPECT_EQ(set->buckets[0].flat.device(), Device::CUDA(0));
  EXPECT_THAT(set->buckets[0].members, ElementsAre(2, 0));
  EXPECT_EQ(set->buckets[1].flat.device(), Device::CPU());
  EXPECT_THAT(set->buckets[1].members, ElementsAre(1));
}

TEST(FlatBucketsTest, SlotsViewTheFlatBufferShapedLikeTheirTensors) {
  const std::vector<Tensor> t = {Make({2, 3}), Make({4})};
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(t, {});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->buckets.size(), 1u);
  const Tensor& flat = set->buckets[0].flat;
  EXPECT_THAT(flat.ToVector<float>().value(),
              ElementsAre(0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_FALSE(flat.SharesStorageWith(t[0]));  // inputs are not aliased
  EXPECT_EQ(set->slots[0].view.shape(), t[0].shape());
  EXPECT_TRUE(set->slots[0].view.SharesStorageWith(flat));
  set->slots[0].view.data<float>()[0] = 7.0f;  // t[0] sits after t[1]
  EXPECT_EQ(flat.data<float>()[4], 7.0f);
}

TEST(FlatBucketsTest, BadInputsAreErrors) {
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(
      {Make({1})}, {.first_bucket_cap_bytes = 0, .bucket_cap_bytes = 8});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("first_bucket_cap_bytes = 0"));
  set = MakeFlatBuckets({Make({1}), Tensor()}, {});
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(set.status().message(), HasSubstr("tensor 1 of 2 is undefined"));
}

TEST(FlatBucketsTest, BindGradsMakesGradsViewsKeepingExistingValues) {
  const std::vector<Tensor> params = {Make({2}), Make({3})};
  for (const Tensor& p : params) ASSERT_TRUE(p.set_requires_grad(true).ok());
  ASSERT_TRUE(params[1].set_grad(Make({3})).ok());  // 1.5 each
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(params, {});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(BindGradsToBuckets(params, *set).ok());
  const Tensor& flat = set->buckets[0].flat;
  for (const Tensor& p : params) {
    EXPECT_TRUE(p.grad().SharesStorageWith(flat));
  }
  // params[1] comes first (reverse order) and kept its gradient.
  EXPECT_THAT(flat.ToVector<float>().value(), ElementsAre(1.5, 1.5, 1.5, 0, 0));

  absl::Status s = BindGradsToBuckets({params[0]}, *set);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("got 1 parameters but the buckets were "
                                     "made from 2 tensors"));
}

// Pack copies each tensor into its slot, unpack copies back; a tensor whose
// shape or dtype changed (or a different count) no longer fits.
TEST(FlatBucketsTest, PackAndUnpackRoundTripAndFitsChecksTheLayout) {
  const std::vector<Tensor> src = {Tensor::FromVector<float>({1, 2, 3}).value(),
                                   Tensor::FromVector<int64_t>({7}).value(),
                                   Tensor::FromVector<float>({4, 5}).value()};
  absl::StatusOr<FlatBucketSet> set = MakeFlatBuckets(
      src, {.first_bucket_cap_bytes = 1024, .bucket_cap_bytes = 1024});
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->buckets.size(), 2u);  // one per dtype
  ASSERT_TRUE(PackIntoFlatBuckets(src, *set).ok());
  // Reverse order: the f32 bucket holds {4, 5} then {1, 2, 3}.
  EXPECT_THAT(set->buckets[0].flat.ToVector<float>().value(),
              ElementsAre(4, 5, 1, 2, 3));
  const std::vector<Tensor> dst = {Make({3}), Make({1}, DType::kI64),
                                   Make({2})};
  EXPECT_TRUE(FitsFlatBuckets(dst, *set));
  ASSERT_TRUE(UnpackFromFlatBuckets(*set, dst).ok());
  EXPECT_THAT(dst[0].ToVector<float>().value(), ElementsAre(1, 2, 3));
  EXPECT_THAT(dst[1].ToVector<int64_t>().value(), ElementsAre(7));
  EXPECT_THAT(dst[2].ToVector<float>().value(), ElementsAre(4, 5));

  const std::vector<Tensor> reshaped = {Make({3}), Make({1}, DType::kI64),
                                        Make({3})};
  const std::vector<Tensor> retyped = {Make({3}), Make({1}), Make({2})};
  const std::vector<Tensor> fewer = {Make({3}), Make({1}, DType::kI64)};
  for (const auto* t : {&reshaped, &retyped, &fewer}) {
    EXPECT_FALSE(FitsFlatBuckets(*t, *set));
    const absl::Status s = PackIntoFlatBuckets(*t, *set);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("do not fit the buckets made from 3 tensors"));
  }
}

}  // namespace
}  // namespace tandem::train
