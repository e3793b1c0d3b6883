#include "train/parallel/core/flat_param.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Values(Shape shape, float first) {
  Tensor t = Tensor::Zeros(shape).value();
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<float>(i);
  return Tensor::FromVector(v, shape).value();
}

// a: 2x3 (6 elements), b: 4, c: 1 -> 11 elements.
FlatParamGroup ThreeMembers() {
  return FlatParamGroup::Create(DType::kF32, Device::CPU(),
                                {{"a", 7, Values({2, 3}, 0)},
                                 {"b", 3, Values({4}, 100)},
                                 {"c", 5, Values({1}, 200)}})
      .value();
}

std::vector<int64_t> Offsets(const FlatParamGroup& g) {
  std::vector<int64_t> out;
  for (const FlatParamMember& m : g.members()) out.push_back(m.offset);
  return out;
}

TEST(FlatParamGroupTest, MembersAreLaidOutBackToBackInOrder) {
  const FlatParamGroup g = ThreeMembers();
  EXPECT_EQ(g.size(), 3);
  EXPECT_EQ(g.numel(), 11);
  EXPECT_THAT(Offsets(g), ElementsAre(0, 6, 10));
  EXPECT_EQ(g.members()[0].name, "a");
  EXPECT_EQ(g.members()[0].index, 7);
  EXPECT_THAT(g.members()[0].shape, ElementsAre(2, 3));
  EXPECT_EQ(g.members()[1].numel, 4);
  EXPECT_EQ(g.members()[2].index, 5);
}

TEST(FlatParamGroupTest, MixedDtypesOrUndefinedTensorsAreRefused) {
  absl::StatusOr<FlatParamGroup> g = FlatParamGroup::Create(
      DType::kF32, Device::CPU(),
      {{"x", 0, Values({2}, 0)},
       {"y", 1, Tensor::Zeros({2}, DType::kF64).value()}});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("tensor 1 (\"y\") is f64"));
  g = FlatParamGroup::Create(DType::kF32, Device::CPU(), {{"z", 0, Tensor()}});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("is undefined"));
}

TEST(FlatParamGroupTest, PaddingRoundsUpToAMultipleOfTheShardCount) {
  const FlatParamGroup g = ThreeMembers();
  EXPECT_EQ(g.ShardNumel(1), 11);
  EXPECT_EQ(g.PaddedNumel(1), 11);
  EXPECT_EQ(g.ShardNumel(4), 3);
  EXPECT_EQ(g.PaddedNumel(4), 12);
  EXPECT_EQ(g.PaddedNumel(11), 11);
  absl::StatusOr<Tensor> flat = g.NewBuffer(4);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->numel(), 12);
  EXPECT_EQ(flat->dtype(), DType::kF32);
  ASSERT_TRUE(g.Pack(*flat).ok());
  // The members' values, then one zero of padding.
  EXPECT_THAT(*flat->ToVector<float>(),
              ElementsAre(0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 200, 0));
  absl::StatusOr<Tensor> f64 = g.NewBuffer(2, DType::kF64, /*zeroed=*/false);
  ASSERT_TRUE(f64.ok()) << f64.status();
  EXPECT_EQ(f64->dtype(), DType::kF64);
  EXPECT_EQ(f64->numel(), 12);
  EXPECT_EQ(g.NewBuffer(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FlatParamGroupTest, AMemberStraddlingAShardBoundaryIsSplitIntoPieces) {
  // 5 + 3 elements in 3 shards of 3: [0, 3) [3, 6) [6, 9), one pad element.
  const FlatParamGroup g = FlatParamGroup::Create(DType::kF32, Device::CPU(),
                                                  {{"p", 0, Values({5}, 0)},
                                                   {"q", 1, Values({3}, 0)}})
                               .value();
  FlatShardRange s0 = g.Shard(0, 3).value();
  EXPECT_EQ(s0.begin, 0);
  EXPECT_EQ(s0.end, 3);
  EXPECT_EQ(s0.data_end, 3);
  ASSERT_EQ(s0.pieces.size(), 1u);
  EXPECT_EQ(s0.pieces[0].member, 0);
  EXPECT_EQ(s0.pieces[0].numel, 3);

  FlatShardRange s1 = g.Shard(1, 3).value();
  EXPECT_EQ(s1.begin, 3);
  EXPECT_EQ(s1.end, 6);
  ASSERT_EQ(s1.pieces.size(), 2u);
  // p's elements 3 and 4 open the shard, q's element 0 follows.
  EXPECT_EQ(s1.pieces[0].member, 0);
  EXPECT_EQ(s1.pieces[0].member_begin, 3);
  EXPECT_EQ(s1.pieces[0].shard_offset, 0);
  EXPECT_EQ(s1.pieces[0].numel, 2);
  EXPECT_EQ(s1.pieces[1].member, 1);
  EXPECT_EQ(s1.pieces[1].member_begin, 0);
  EXPECT_EQ(s1.pieces[1].shard_offset, 2);
  EXPECT_EQ(s1.pieces[1].numel, 1);

  FlatShardRange s2 = g.Shard(2, 3).value();
  EXPECT_EQ(s2.begin, 6);
  EXPECT_EQ(s2.end, 9);
  EXPECT_EQ(s2.data_end, 8);
  EXPECT_EQ(s2.data_numel(), 2);
  ASSERT_EQ(s2.pieces.size(), 1u);
  EXPECT_EQ(s2.pieces[0].member, 1);
  EXPECT_EQ(s2.pieces[0].member_begin, 1);
  EXPECT_EQ(s2.pieces[0].numel, 2);
}

TEST(FlatParamGroupTest, MoreShardsThanElementsLeavesPaddingOnlyShards) {
  const FlatParamGroup g = FlatParamGroup::Create(DType::kF32, Device::CPU(),
                                                  {{"p", 0, Values({3}, 0)}})
                               .value();
  EXPECT_EQ(g.ShardNumel(5), 1);
  EXPECT_EQ(g.PaddedNumel(5), 5);
  FlatShardRange s2 = g.Shard(2, 5).value();
  EXPECT_EQ(s2.data_numel(), 1);
  ASSERT_EQ(s2.pieces.size(), 1u);
  EXPECT_EQ(s2.pieces[0].member_begin, 2);
  for (int64_t k : {3, 4}) {
    FlatShardRange s = g.Shard(k, 5).value();
    EXPECT_EQ(s.begin, k);
    EXPECT_EQ(s.end, k + 1);
    EXPECT_EQ(s.data_end, k) << "shard " << k;  // padding only
    EXPECT_EQ(s.data_numel(), 0);
    EXPECT_TRUE(s.pieces.empty());
  }
  EXPECT_EQ(g.Shard(5, 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.Shard(-1, 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.Shard(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FlatParamGroupTest, AnEmptyGroupHasEmptyShardsAndBuffers) {
  absl::StatusOr<FlatParamGroup> g =
      FlatParamGroup::Create(DType::kF64, Device::CPU(), {});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->empty());
  EXPECT_EQ(g->dtype(), DType::kF64);
  EXPECT_EQ(g->numel(), 0);
  EXPECT_EQ(g->ShardNumel(4), 0);
  EXPECT_EQ(g->PaddedNumel(4), 0);
  FlatShardRange s = g->Shard(3, 4).value();
  EXPECT_EQ(s.begin, 0);
  EXPECT_EQ(s.end, 0);
  EXPECT_TRUE(s.pieces.empty());
  absl::StatusOr<Tensor> flat = g->NewBuffer(4);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(flat->numel(), 0);
  EXPECT_TRUE(g->Pack(*flat).ok());
  EXPECT_TRUE(g->BindGrads(*flat).ok());
  EXPECT_TRUE(g->Views(*flat)->empty());
  EXPECT_EQ(g->FirstUnbound(*flat), std::nullopt);
}

TEST(FlatParamGroupTest, ParameterViewsAliasTheFlatBuffer) {
  const FlatParamGroup g = ThreeMembers();
  Tensor flat = g.NewBuffer(2).value();  // 12 elements
  ASSERT_TRUE(g.Pack(flat).ok());
  EXPECT_EQ(g.FirstUnbound(flat), 0);  // packed, not yet bound
  ASSERT_TRUE(g.BindParams(flat).ok());
  EXPECT_EQ(g.FirstUnbound(flat), std::nullopt);
  // A write through the buffer shows in the parameter, and back.
  ASSERT_TRUE(flat.View(7, {1})->CopyFrom(Values({1}, -1)).ok());
  EXPECT_THAT(*g.members()[1].tensor.ToVector<float>(),
              ElementsAre(100, -1, 102, 103));
  ASSERT_TRUE(g.members()[2].tensor.CopyFrom(Values({1}, 42)).ok());
  EXPECT_EQ(flat.ToVector<float>()->at(10), 42);
  // The View of a member is the same memory as the bound parameter.
  Tensor view = g.View(flat, 0).value();
  EXPECT_EQ(view.storage(), g.members()[0].tensor.storage());
  EXPECT_EQ(view.storage_offset(), g.members()[0].tensor.storage_offset());
  // Given new memory, a member is no longer bound: FirstUnbound names it.
  ASSERT_TRUE(g.members()[1].tensor.SetData(Values({4}, 0)).ok());
  EXPECT_EQ(g.FirstUnbound(flat), 1);
}

TEST(FlatParamGroupTest, BindParamsTakesAnotherDtypeForMixedPrecision) {
  const FlatParamGroup g = ThreeMembers();
  Tensor flat = g.NewBuffer(1, DType::kF64).value();
  ASSERT_TRUE(g.BindParams(flat).ok());
  EXPECT_EQ(g.members()[0].tensor.dtype(), DType::kF64);
  EXPECT_EQ(g.FirstUnbound(flat), std::nullopt);
}

TEST(FlatParamGroupTest, GradientViewsAliasTheFlatBufferAndKeepOldGrads) {
  const FlatParamGroup g = ThreeMembers();
  const Tensor& b = g.members()[1].tensor;
  ASSERT_TRUE(b.set_requires_grad(true).ok());
  ASSERT_TRUE(b.set_grad(Values({4}, 10)).ok());  // an existing gradient
  Tensor flat = g.NewBuffer(3).value();           // 12 elements
  ASSERT_TRUE(g.BindGrads(flat).ok());
  EXPECT_THAT(*flat.ToVector<float>(),
              ElementsAre(0, 0, 0, 0, 0, 0, 10, 11, 12, 13, 0, 0));
  EXPECT_EQ(b.grad().storage(), flat.storage());
  EXPECT_EQ(b.grad().storage_offset(), flat.storage_offset() + 6);
  ASSERT_TRUE(flat.View(9, {1})->CopyFrom(Values({1}, 7)).ok());
  EXPECT_THAT(*b.grad().ToVector<float>(), ElementsAre(10, 11, 12, 7));
}

TEST(FlatParamGroupTest, ViewsOfABufferTooShortOrOnAnotherShapeAreRefused) {
  const FlatParamGroup g = ThreeMembers();
  absl::StatusOr<Tensor> v = g.View(Tensor::Zeros({10}).value(), 0);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("at least 11 elements"));
  v = g.View(Tensor::Zeros({3, 4}).value(), 0);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  v = g.View(Tensor::Zeros({12}).value(), 3);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
