// The virtual world's placement, its gathered values, and VirtualGradSum:
// the same gradients, bit for bit, at every allowed world size, equal to
// the canonical tree over the K virtual ranks' scaled gradients, which a
// left-to-right sum of the same terms does not give.
#include "train/parallel/core/virtual_world.h"

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "comm/ordered/order_sensitive_terms.h"
#include "comm/ordered/ordered_sum.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PlaceVirtualWorldTest, OffAndPlaced) {
  absl::StatusOr<VirtualWorld> off = PlaceVirtualWorld(0, 4, 3);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->on());
  EXPECT_EQ(off->rank_of(0), 3);
  EXPECT_EQ(off->local, 1);
  absl::StatusOr<VirtualWorld> on = PlaceVirtualWorld(8, 4, 3);
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->on());
  EXPECT_EQ(on->first, 6);
  EXPECT_EQ(on->local, 2);
  EXPECT_EQ(on->rank_of(1), 7);
}

TEST(PlaceVirtualWorldTest, RefusesWorldsThatCannotPlayK) {
  absl::Status s = PlaceVirtualWorld(12, 3, 0).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("12"));
  EXPECT_THAT(s.message(), HasSubstr("3 ranks"));
  EXPECT_EQ(PlaceVirtualWorld(-1, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceVirtualWorld(2, 4, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CanonicalTreeSumF64Test, IsTheTreeNotLeftToRight) {
  // 1e16 + 1 rounds back to 1e16 (doubles are 2 apart there), so the order
  // decides what survives of the ones.
  const std::vector<double> v = {1.0, 1e16, 1.0, -1e16, 1.0};
  // The tree over 5: T(0,2) + (T(2,3) + T(3,5)).
  const double tree = (1.0 + 1e16) + (1.0 + (-1e16 + 1.0));
  const double left = (((1.0 + 1e16) + 1.0) + -1e16) + 1.0;
  ASSERT_NE(tree, left);
  EXPECT_EQ(CanonicalTreeSumF64(v), tree);
  EXPECT_EQ(CanonicalTreeSumF64({2.5}), 2.5);
}

TEST(GatherVirtualRankValuesTest, InVirtualRankOrderOnEveryRank) {
  std::mutex mu;
  std::vector<std::vector<double>> got(2);
  sim::RunResult r = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    TANDEM_ASSIGN_OR_RETURN(VirtualWorld vw,
                            PlaceVirtualWorld(4, comm.size(), rank));
    std::vector<double> mine = {0.1 * vw.rank_of(0), 0.1 * vw.rank_of(1)};
    TANDEM_ASSIGN_OR_RETURN(
        std::vector<double> all,
        GatherVirtualRankValues(comm, Device::CPU(), vw, mine));
    std::lock_guard<std::mutex> lock(mu);
    got[rank] = all;
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(got[0], ElementsAre(0.0, 0.1, 0.2, 0.1 * 3));
  EXPECT_EQ(got[0], got[1]);
}

constexpr int64_t kCount = 37;  // not a multiple of any world size

// Every rank's gradients after VirtualGradSum at K = `k` on `w` ranks, where
// virtual rank v's gradient of the two parameters is OrderSensitiveTerms(v).
// `write_in_place`: each virtual rank's gradient is written into the grads
// where they are (as a backward writes them: from the second virtual rank
// on, into the tree's own buffer), for two steps; otherwise new gradient
// tensors are installed (the copying path).
std::vector<std::vector<float>> SummedAt(int64_t k, int w,
                                         bool write_in_place = false) {
  std::mutex mu;
  std::vector<std::vector<float>> out(w);
  sim::RunResult r = sim::Run(w, [&](int rank, comm::Communicator& comm) {
    TANDEM_ASSIGN_OR_RETURN(VirtualWorld vw,
                            PlaceVirtualWorld(k, comm.size(), rank));
    TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::Zeros({5, 4}));
    TANDEM_ASSIGN_OR_RETURN(Tensor b, Tensor::Zeros({kCount - 20}));
    TANDEM_ASSIGN_OR_RETURN(auto grads,
                            VirtualGradSum::Create(comm, vw, {a, b}));
    const int steps = write_in_place ? 2 : 1;
    for (int step = 0; step < steps; ++step) {
      for (int64_t v = 0; v < vw.local; ++v) {
        const std::vector<float> terms =
            comm::OrderSensitiveTerms<float>(vw.rank_of(v), kCount);
        TANDEM_ASSIGN_OR_RETURN(
            Tensor ga,
            Tensor::FromVector(
                std::vector<float>(terms.begin(), terms.begin() + 20), {5, 4}));
        TANDEM_ASSIGN_OR_RETURN(
            Tensor gb, Tensor::FromVector(std::vector<float>(terms.begin() + 20,
                                                             terms.end())));
        if (write_in_place && a.has_grad()) {
          TANDEM_RETURN_IF_ERROR(a.grad().CopyFrom(ga));
          TANDEM_RETURN_IF_ERROR(b.grad().CopyFrom(gb));
        } else {
          TANDEM_RETURN_IF_ERROR(a.set_grad(ga));
          TANDEM_RETURN_IF_ERROR(b.set_grad(gb));
        }
        TANDEM_RETURN_IF_ERROR(grads->Fold());
        // After a fold the grads view the next leaf's buffer.
        if (v + 1 < vw.local && !grads->grads_bound()) {
          return absl::InternalError("the grads are not the tree's buffer");
        }
      }
      TANDEM_RETURN_IF_ERROR(grads->Reduce());
      if (!grads->grads_bound()) {
        return absl::InternalError("the grads do not view the sum");
      }
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> va, a.grad().ToVector<float>());
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> vb, b.grad().ToVector<float>());
    va.insert(va.end(), vb.begin(), vb.end());
    std::lock_guard<std::mutex> lock(mu);
    out[rank] = va;
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
  return out;
}

// K = 8 scales the sum once (VirtualScaleAfterSum), K = 6 each virtual
// rank's gradient before it is folded: both give the tree over the scaled
// gradients, bit for bit, at every allowed W.
void ExpectSameBitsAtEveryAllowedWorldSize(int64_t kK) {
  // The reference: each virtual rank's terms times 1/K, summed by the tree.
  std::vector<std::vector<float>> leaves;
  std::vector<const void*> ptrs;
  for (int64_t v = 0; v < kK; ++v) {
    std::vector<float> t = comm::OrderSensitiveTerms<float>(v, kCount);
    // Scaled by DDP's kernel, as VirtualGradSum scales (or, for a power of
    // two, exactly).
    absl::StatusOr<Tensor> tt = Tensor::FromVector(t);
    ASSERT_TRUE(tt.ok());
    ASSERT_TRUE(ScaleInPlace(*tt, 1.0 / static_cast<double>(kK)).ok());
    t = tt->ToVector<float>().value();
    leaves.push_back(t);
  }
  for (const auto& l : leaves) ptrs.push_back(l.data());
  std::vector<float> want(kCount);
  ASSERT_TRUE(
      comm::CanonicalTreeSum(DType::kF32, kCount, ptrs, want.data()).ok());
  // A left-to-right sum of the same leaves gives other bits: the test can
  // tell the orders apart.
  std::vector<float> left(kCount, 0.0f);
  for (const auto& l : leaves) {
    for (int64_t i = 0; i < kCount; ++i) left[i] += l[i];
  }
  ASSERT_NE(left, want);
  for (int64_t w : AllowedWorldSizes(kK)) {
    SCOPED_TRACE(w);
    for (const std::vector<float>& got : SummedAt(kK, static_cast<int>(w))) {
      EXPECT_EQ(got, want);
    }
    for (const std::vector<float>& got :
         SummedAt(kK, static_cast<int>(w), /*write_in_place=*/true)) {
      EXPECT_EQ(got, want);
    }
  }
}

TEST(VirtualGradSumTest, SameBitsAtEveryAllowedWorldSize) {
  EXPECT_TRUE(VirtualScaleAfterSum(8));
  ExpectSameBitsAtEveryAllowedWorldSize(8);
  EXPECT_FALSE(VirtualScaleAfterSum(6));
  ExpectSameBitsAtEveryAllowedWorldSize(6);
}

TEST(VirtualGradSumTest, ReduceBeforeEveryFoldIsRefused) {
  sim::RunResult r = sim::Run(1, [&](int, comm::Communicator& comm) {
    TANDEM_ASSIGN_OR_RETURN(VirtualWorld vw, PlaceVirtualWorld(2, 1, 0));
    TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::Zeros({3}));
    TANDEM_ASSIGN_OR_RETURN(auto grads, VirtualGradSum::Create(comm, vw, {a}));
    TANDEM_RETURN_IF_ERROR(grads->Fold());  // no gradient yet: zeros
    absl::Status early = grads->Reduce();
    EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(early.message(), HasSubstr("1 of the 2 virtual ranks"));
    TANDEM_RETURN_IF_ERROR(grads->Fold());
    EXPECT_EQ(grads->Fold().code(), absl::StatusCode::kFailedPrecondition);
    TANDEM_RETURN_IF_ERROR(grads->Reduce());
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> g, a.grad().ToVector<float>());
    EXPECT_THAT(g, ElementsAre(0.0f, 0.0f, 0.0f));
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(VirtualGradSumTest, RefusesOffAndMixedDtypes) {
  sim::RunResult r = sim::Run(1, [&](int, comm::Communicator& comm) {
    TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::Zeros({3}));
    TANDEM_ASSIGN_OR_RETURN(Tensor h, Tensor::Zeros({3}, DType::kBF16));
    EXPECT_EQ(VirtualGradSum::Create(comm, VirtualWorld{}, {a}).status().code(),
              absl::StatusCode::kInvalidArgument);
    absl::Status mixed =
        VirtualGradSum::Create(comm, VirtualWorld{.size = 1}, {a, h}).status();
    EXPECT_EQ(mixed.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(mixed.message(), HasSubstr("f32 and bf16"));
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
}

}  // namespace
}  // namespace tandem::train
