// Unit tests of DistributedDataParallel: bucketing, aliasing, the world-size-1
// path, construction checks, overlap, and every misuse error. Multi-rank cases
// run on the simulated cluster (sim::Run). The equivalence with single-rank
// training lives in tests/ddp_equivalence_test.cc.
#include "train/parallel/ddp/ddp.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/module.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

#define ASSERT_OK(expr)                           \
  do {                                            \
    const ::absl::Status ddp_test_s_ = (expr);    \
    ASSERT_TRUE(ddp_test_s_.ok()) << ddp_test_s_; \
  } while (false)

// An MLP in -> hidden -> out (Linear, ReLU, Linear).
absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp(int64_t in, int64_t hidden,
                                                    int64_t out, uint64_t seed,
                                                    DType dtype = DType::kF32) {
  Generator gen(seed);
  auto model = std::make_unique<nn::Sequential>();
  nn::Linear::Options options;
  options.dtype = dtype;
  TANDEM_RETURN_IF_ERROR(
      model->Append(nn::Linear::Create(in, hidden, gen, options)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(
      model->Append(nn::Linear::Create(hidden, out, gen, options)));
  return model;
}

// Features [rows, in] from `seed`, in [-1, 1].
absl::StatusOr<Tensor> Features(int64_t rows, int64_t in, uint64_t seed) {
  Generator gen(seed);
  std::vector<float> values(rows * in);
  gen.Uniform(values.data(), rows * in, -1.f, 1.f);
  return Tensor::FromVector(values, {rows, in});
}

// sum(model(x)^2) / rows: a loss every parameter contributes to.
absl::StatusOr<Tensor> SquareLoss(const Tensor& y) {
  TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
  return Mean(sq);
}

std::vector<float> Values(const Tensor& t) {
  absl::StatusOr<std::vector<float>> v = t.ToVector<float>();
  return v.ok() ? *v : std::vector<float>{};
}

// Fails every call and counts it: proves that world size 1 communicates not
// at all.
class CountingCommunicator : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string_view backend() const override { return "counting"; }
  std::unique_ptr<comm::Work> AllReduce(comm::BufferView,
                                        comm::ReduceOp) override {
    return Count();
  }
  std::unique_ptr<comm::Work> Broadcast(comm::BufferView, int) override {
    return Count();
  }
  std::unique_ptr<comm::Work> AllGather(comm::BufferView,
                                        comm::BufferView) override {
    return Count();
  }
  std::unique_ptr<comm::Work> ReduceScatter(comm::BufferView, comm::BufferView,
                                            comm::ReduceOp) override {
    return Count();
  }
  std::unique_ptr<comm::Work> Send(comm::BufferView, int) override {
    return Count();
  }
  std::unique_ptr<comm::Work> Recv(comm::BufferView, int) override {
    return Count();
  }
  absl::Status Barrier() override {
    ++calls;
    return absl::InternalError("no communication expected");
  }

  int calls = 0;

 private:
  std::unique_ptr<comm::Work> Count() {
    ++calls;
    return comm::MakeCompletedWork(
        absl::InternalError("no communication expected"));
  }
};

// A module with two Linear layers of which Forward uses only the first.
class PartlyUsed : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<PartlyUsed>> Create(uint64_t seed) {
    Generator gen(seed);
    auto m = std::unique_ptr<PartlyUsed>(new PartlyUsed());
    TANDEM_ASSIGN_OR_RETURN(
        m->used_, m->RegisterModule("used", nn::Linear::Create(3, 2, gen)));
    TANDEM_ASSIGN_OR_RETURN(
        m->unused_, m->RegisterModule("unused", nn::Linear::Create(3, 2, gen)));
    return m;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    if (use_both) {
      TANDEM_ASSIGN_OR_RETURN(Tensor a, used_->Forward(x));
      TANDEM_ASSIGN_OR_RETURN(Tensor b, unused_->Forward(x));
      return Add(a, b);
    }
    return used_->Forward(x);
  }
  std::string_view type_name() const override { return "PartlyUsed"; }
  bool use_both = false;

 private:
  PartlyUsed() = default;
  nn::Linear* used_ = nullptr;
  nn::Linear* unused_ = nullptr;
};

// ---- Bucketing.

// A bucket's parameter names and offsets, in layout order.
std::vector<std::string> Names(const DdpBucket& bucket) {
  std::vector<std::string> out;
  for (const FlatParamMember& m : bucket.group.members()) {
    out.push_back(m.name);
  }
  return out;
}
std::vector<int64_t> Offsets(const DdpBucket& bucket) {
  std::vector<int64_t> out;
  for (const FlatParamMember& m : bucket.group.members()) {
    out.push_back(m.offset);
  }
  return out;
}

TEST(DdpBucketsTest, ReverseOrderCapsAndOversizeParameters) {
  // Parameters: 0.weight [8, 4] (128 B), 0.bias [8] (32 B),
  //             2.weight [3, 8] (96 B),  2.bias [3] (12 B).
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(4, 8, 3, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  DdpOptions options;
  options.first_bucket_cap_bytes = 110;  // 2.bias + 2.weight = 108 fit
  options.bucket_cap_bytes = 100;        // 0.bias alone; 0.weight oversize
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm, options);
  ASSERT_OK(ddp.status());
  const std::vector<DdpBucket>& buckets = (*ddp)->buckets();
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_THAT(Names(buckets[0]), ElementsAre("2.bias", "2.weight"));
  EXPECT_THAT(Offsets(buckets[0]), ElementsAre(0, 3));
  EXPECT_EQ(buckets[0].flat.numel(), 27);
  EXPECT_THAT(Names(buckets[1]), ElementsAre("0.bias"));
  EXPECT_THAT(Names(buckets[2]), ElementsAre("0.weight"));
  EXPECT_EQ(buckets[2].flat.numel(), 32);

  // Every grad is a view into its bucket, at its offset.
  for (const nn::NamedTensor& p : (*model)->NamedParameters()) {
    bool found = false;
    for (const DdpBucket& b : buckets) {
      for (const FlatParamMember& m : b.group.members()) {
        if (m.name != p.name) continue;
        found = true;
        EXPECT_TRUE(p.tensor.grad().SharesStorageWith(b.flat)) << p.name;
        EXPECT_EQ(p.tensor.grad().storage_offset(),
                  b.flat.storage_offset() + m.offset)
            << p.name;
      }
    }
    EXPECT_TRUE(found) << p.name;
  }
  EXPECT_EQ(comm.calls, 0);
}

TEST(DdpBucketsTest, DefaultCapsGiveOneBucket) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(4, 8, 3, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm);
  ASSERT_OK(ddp.status());
  ASSERT_EQ((*ddp)->buckets().size(), 1u);
  EXPECT_THAT(Names((*ddp)->buckets()[0]),
              ElementsAre("2.bias", "2.weight", "0.bias", "0.weight"));
}

TEST(DdpBucketsTest, DtypesNeverShareABucket) {
  // Layer 0 in f64, layer 1 in f32.
  Generator gen(3);
  nn::Sequential model;
  nn::Linear::Options f64;
  f64.dtype = DType::kF64;
  ASSERT_OK(model.Append(nn::Linear::Create(2, 3, gen, f64)));
  ASSERT_OK(model.Append(nn::Linear::Create(3, 2, gen)));
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(model, comm);
  ASSERT_OK(ddp.status());
  const std::vector<DdpBucket>& buckets = (*ddp)->buckets();
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].group.dtype(), DType::kF32);
  EXPECT_THAT(Names(buckets[0]), ElementsAre("1.bias", "1.weight"));
  EXPECT_EQ(buckets[1].group.dtype(), DType::kF64);
  EXPECT_THAT(Names(buckets[1]), ElementsAre("0.bias", "0.weight"));
}

TEST(DdpBucketsTest, ExistingGradientsAreCopiedIntoTheBucket) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(2, 3, 2, 1);
  ASSERT_OK(model.status());
  const Tensor bias = (*model)->NamedParameters()[3].tensor;  // "2.bias"
  absl::StatusOr<Tensor> g = Tensor::FromVector(std::vector<float>{1.5f, -2.f});
  ASSERT_OK(g.status());
  ASSERT_OK(bias.set_grad(*g));
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm);
  ASSERT_OK(ddp.status());
  EXPECT_TRUE(bias.grad().SharesStorageWith((*ddp)->buckets()[0].flat));
  EXPECT_THAT(Values(bias.grad()), ElementsAre(1.5f, -2.f));
}

// ---- World size 1.

TEST(DdpWorldSizeOneTest, NoCommunicationAndLocalGradients) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(4, 8, 3, 7);
  absl::StatusOr<std::unique_ptr<nn::Sequential>> twin = Mlp(4, 8, 3, 7);
  ASSERT_OK(model.status());
  ASSERT_OK(twin.status());
  absl::StatusOr<Tensor> x = Features(5, 4, 11);
  ASSERT_OK(x.status());

  CountingCommunicator comm;
  DdpOptions options;
  options.first_bucket_cap_bytes = 40;
  options.bucket_cap_bytes = 40;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm, options);
  ASSERT_OK(ddp.status());
  for (int step = 0; step < 2; ++step) {
    (*model)->ZeroGrad();
    absl::StatusOr<Tensor> y = (*ddp)->Forward(*x);
    ASSERT_OK(y.status());
    absl::StatusOr<Tensor> loss = SquareLoss(*y);
    ASSERT_OK(loss.status());
    ASSERT_OK((*ddp)->Backward(*loss));
  }
  EXPECT_EQ(comm.calls, 0);

  // Same as plain local training (two accumulated-then-zeroed steps: the
  // last step's gradient), bit for bit.
  (*twin)->ZeroGrad();
  absl::StatusOr<Tensor> y = (*twin)->Forward(*x);
  ASSERT_OK(y.status());
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK(loss->Backward());
  const auto a = (*model)->NamedParameters();
  const auto b = (*twin)->NamedParameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(Values(a[i].tensor.grad()), Values(b[i].tensor.grad()))
        << a[i].name;
  }
}

// ---- Construction.

TEST(DdpCreateTest, BadOptions) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(2, 3, 2, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  DdpOptions options;
  options.first_bucket_cap_bytes = 0;
  absl::Status s =
      DistributedDataParallel::Create(**model, comm, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("first_bucket_cap_bytes = 0"));

  options = DdpOptions();
  options.bucket_cap_bytes = -5;
  s = DistributedDataParallel::Create(**model, comm, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bucket_cap_bytes = -5"));

  options = DdpOptions();
  options.timeout = absl::ZeroDuration();
  s = DistributedDataParallel::Create(**model, comm, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("timeout must be positive"));
  EXPECT_EQ(comm.calls, 0);
}

TEST(DdpCreateTest, ModuleWithoutTrainableParameters) {
  nn::Sequential empty;
  ASSERT_OK(empty.Append(std::make_unique<nn::ReLU>()));
  CountingCommunicator comm;
  absl::Status s = DistributedDataParallel::Create(empty, comm).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no parameter that requires a gradient"));
}

TEST(DdpCreateTest, BroadcastsRank0Parameters) {
  constexpr int kWorld = 3;
  std::vector<std::vector<float>> first_weight(kWorld);
  sim::RunResult result =
      sim::Run(kWorld, [&](int rank, comm::Communicator& comm) -> absl::Status {
        // Every rank starts from different weights.
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(2, 3, 2, 100 + rank));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        first_weight[rank] = Values(model->NamedParameters()[0].tensor);
        return absl::OkStatus();
      });
  ASSERT_OK(result.status());
  absl::StatusOr<std::unique_ptr<nn::Sequential>> rank0 = Mlp(2, 3, 2, 100);
  ASSERT_OK(rank0.status());
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(first_weight[r], Values((*rank0)->NamedParameters()[0].tensor))
        << r;
  }
}

// Every rank fails with the same message naming rank `bad` and the parameter.
void ExpectModelMismatch(const sim::RunResult& result,
                         const std::string& what) {
  ASSERT_TRUE(result.launch.ok()) << result.launch;
  for (size_t r = 0; r < result.ranks.size(); ++r) {
    EXPECT_EQ(result.ranks[r].code(), absl::StatusCode::kInvalidArgument)
        << result.ranks[r];
    EXPECT_THAT(result.ranks[r].message(), HasSubstr(what)) << r;
    EXPECT_THAT(result.ranks[r].message(),
                HasSubstr("the ranks hold different models"))
        << r;
  }
}

TEST(DdpCreateTest, ShapeMismatchNamesRankAndParameter) {
  sim::RunResult result =
      sim::Run(3, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(2, rank == 2 ? 4 : 3, 2, 1));
        return DistributedDataParallel::Create(*model, comm).status();
      });
  ExpectModelMismatch(
      result,
      "parameter 0 is \"0.weight\" f32[3, 2] on rank 0 but \"0.weight\" "
      "f32[4, 2] on rank 2");
}

TEST(DdpCreateTest, DtypeMismatchNamesRankAndParameter) {
  sim::RunResult result =
      sim::Run(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(
            auto model, Mlp(2, 3, 2, 1, rank == 1 ? DType::kF64 : DType::kF32));
        return DistributedDataParallel::Create(*model, comm).status();
      });
  ExpectModelMismatch(
      result,
      "\"0.weight\" f32[3, 2] on rank 0 but \"0.weight\" f64[3, 2] on rank 1");
}

TEST(DdpCreateTest, CountMismatchNamesRankAndParameter) {
  sim::RunResult result =
      sim::Run(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(1);
        nn::Sequential model;
        TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(2, 2, gen)));
        if (rank == 0)
          TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(2, 2, gen)));
        return DistributedDataParallel::Create(model, comm).status();
      });
  ExpectModelMismatch(
      result,
      "rank 1 has 2 parameters but rank 0 has 4 (parameter 2, \"1.weight\" "
      "f32[2, 2], exists only on rank 0)");
}

// ---- Gradient averaging and overlap.

// World size x overlap on/off.
class DdpAverageTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
};

TEST_P(DdpAverageTest, EqualsPyTorchArithmeticBitForBit) {
  // Rank r trains on its own batch; the averaged gradient equals PyTorch's
  // arithmetic computed locally, bit for bit: every rank's gradient times
  // float(1 / world), summed in rank order. At world sizes 2 and 4 DDP gets
  // there by summing and dividing (ReduceOp::kAvg), at 3 by scaling first;
  // with overlap off nothing is launched before FinishGradientSync.
  const auto [world, overlap] = GetParam();
  std::vector<std::vector<std::vector<float>>> grads(world);
  DdpOptions options;
  options.first_bucket_cap_bytes = 64;
  options.bucket_cap_bytes = 64;
  options.overlap = overlap;
  sim::RunResult result =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(4, 8, 3, 5));
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, DistributedDataParallel::Create(*model, comm, options));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(3, 4, 20 + rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
        TANDEM_RETURN_IF_ERROR(loss.Backward());
        const int64_t launched = ddp->num_buckets_launched();
        if (overlap ? launched != static_cast<int64_t>(ddp->buckets().size())
                    : launched != 0) {
          return absl::InternalError(
              absl::StrCat(launched, " of ", ddp->buckets().size(),
                           " buckets launched when backward ended"));
        }
        TANDEM_RETURN_IF_ERROR(ddp->FinishGradientSync());
        for (const Tensor& p : model->Parameters())
          grads[rank].push_back(Values(p.grad()));
        return absl::OkStatus();
      });
  ASSERT_OK(result.status());

  std::vector<std::vector<std::vector<float>>> local(world);
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(4, 8, 3, 5);
    ASSERT_OK(model.status());
    absl::StatusOr<Tensor> x = Features(3, 4, 20 + r);
    ASSERT_OK(x.status());
    absl::StatusOr<Tensor> y = (*model)->Forward(*x);
    ASSERT_OK(y.status());
    absl::StatusOr<Tensor> loss = SquareLoss(*y);
    ASSERT_OK(loss.status());
    ASSERT_OK(loss->Backward());
    for (const Tensor& p : (*model)->Parameters())
      local[r].push_back(Values(p.grad()));
  }
  const float scale = static_cast<float>(1.0 / world);
  for (size_t i = 0; i < local[0].size(); ++i) {
    std::vector<float> expected(local[0][i].size());
    for (size_t k = 0; k < expected.size(); ++k) {
      float sum = local[0][i][k] * scale;
      for (int r = 1; r < world; ++r) sum += local[r][i][k] * scale;
      expected[k] = sum;
    }
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(grads[r][i], expected) << "parameter " << i << ", rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndOverlap, DdpAverageTest,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Bool()));

TEST(DdpSyncTest, BucketsLaunchWhileBackwardRuns) {
  // One bucket per parameter: 2.bias, 2.weight, 0.bias, 0.weight. When the
  // last layer's bias has its gradient, its bucket is launched already,
  // while the first layer's gradients are still to be computed: the
  // reductions overlap the rest of backward.
  std::vector<int64_t> launched_at_last_layer(2, -1);
  std::vector<int64_t> launched_at_first_layer(2, -1);
  std::vector<int64_t> buckets(2, -1);
  DdpOptions options;
  options.first_bucket_cap_bytes = 1;
  options.bucket_cap_bytes = 1;
  sim::RunResult result =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(4, 8, 3, 5));
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, DistributedDataParallel::Create(*model, comm, options));
        buckets[rank] = static_cast<int64_t>(ddp->buckets().size());
        DistributedDataParallel* raw = ddp.get();
        // Registered after DDP's hooks, so they run after DDP handled the
        // gradient.
        const std::vector<Tensor> params = model->Parameters();
        TANDEM_RETURN_IF_ERROR(
            params[3]  // 2.bias
                .AddPostAccumulateGradHook([&, raw, rank](Tensor&) {
                  launched_at_last_layer[rank] = raw->num_buckets_launched();
                })
                .status());
        TANDEM_RETURN_IF_ERROR(
            params[0]  // 0.weight
                .AddPostAccumulateGradHook([&, raw, rank](Tensor&) {
                  launched_at_first_layer[rank] = raw->num_buckets_launched();
                })
                .status());
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(3, 4, 20 + rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
        TANDEM_RETURN_IF_ERROR(loss.Backward());
        // Backward is over; nothing waited for yet.
        if (ddp->num_buckets_launched() != 4) {
          return absl::InternalError(
              "not every bucket launched after backward");
        }
        return ddp->FinishGradientSync();
      });
  ASSERT_OK(result.status());
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(buckets[r], 4);
    EXPECT_GE(launched_at_last_layer[r], 1) << r;
    EXPECT_LE(launched_at_last_layer[r], 2) << r;
    EXPECT_GE(launched_at_first_layer[r], 2) << r;
  }
}

TEST(DdpSyncTest, ClearedGradientsAreReinstalledAsViews) {
  sim::RunResult result =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(4, 8, 3, 5));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        model->ZeroGrad(/*set_to_none=*/true);  // drops the views
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(3, 4, 20 + rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
        TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
        for (const Tensor& p : model->Parameters()) {
          if (!p.grad().SharesStorageWith(ddp->buckets()[0].flat)) {
            return absl::InternalError("gradient is not a bucket view");
          }
        }
        return absl::OkStatus();
      });
  ASSERT_OK(result.status());
}

// ---- find_unused_parameters and the misuse errors.

TEST(DdpMisuseTest, UnusedParameterWithoutFindUnusedParameters) {
  sim::RunResult result =
      sim::Run(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, PartlyUsed::Create(1));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 3, rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
        return ddp->Backward(loss);
      });
  for (int r = 0; r < 2; ++r) {
    const absl::Status& s = result.ranks[r];
    // Each rank finds the problem itself; whichever returns first may abort
    // the other's collectives, but the local check runs before any wait.
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(
        s.message(),
        HasSubstr("2 of 4 parameters received no gradient in this step: "
                  "\"unused.weight\", \"unused.bias\""));
    EXPECT_THAT(s.message(), HasSubstr("find_unused_parameters = true"));
  }
}

TEST(DdpMisuseTest, FindUnusedParametersAveragesZeros) {
  // Rank 0 uses both layers, rank 1 only the first: "unused" gets rank 0's
  // gradient times 1/2 (rank 1 contributes zeros).
  std::vector<std::vector<float>> unused_grad(2);
  DdpOptions options;
  options.find_unused_parameters = true;
  options.first_bucket_cap_bytes = 8;  // split the layers
  options.bucket_cap_bytes = 8;
  sim::RunResult result =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, PartlyUsed::Create(1));
        model->use_both = rank == 0;
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, DistributedDataParallel::Create(*model, comm, options));
        for (int step = 0; step < 2;
             ++step) {  // the second step reuses the state
          model->ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 3, 0));
          TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
        }
        unused_grad[rank] =
            Values(model->NamedParameters()[3].tensor.grad());  // unused.bias
        return absl::OkStatus();
      });
  ASSERT_OK(result.status());

  absl::StatusOr<std::unique_ptr<PartlyUsed>> local = PartlyUsed::Create(1);
  ASSERT_OK(local.status());
  (*local)->use_both = true;
  absl::StatusOr<Tensor> x = Features(2, 3, 0);
  ASSERT_OK(x.status());
  absl::StatusOr<Tensor> y = (*local)->Forward(*x);
  ASSERT_OK(y.status());
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK(loss->Backward());
  std::vector<float> expected =
      Values((*local)->NamedParameters()[3].tensor.grad());
  ASSERT_EQ(expected.size(), 2u);
  for (float& v : expected) v = v * 0.5f + 0.f;
  EXPECT_EQ(unused_grad[0], expected);
  EXPECT_EQ(unused_grad[1], expected);
}

TEST(DdpMisuseTest, ForwardBeforeTheReductionFinished) {
  sim::RunResult result =
      sim::Run(2, [](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(3, 4, 2, 1));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 3, rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
        TANDEM_RETURN_IF_ERROR(loss.Backward());  // forgot FinishGradientSync
        absl::Status again = ddp->Forward(x).status();
        if (again.code() != absl::StatusCode::kFailedPrecondition) {
          return absl::InternalError(absl::StrCat(
              "expected FailedPrecondition, got ", again.ToString()));
        }
        if (again.message().find("call ddp.FinishGradientSync()") ==
                absl::string_view::npos ||
            again.message().find("1 of 1 buckets launched") ==
                absl::string_view::npos) {
          return absl::InternalError(
              absl::StrCat("unexpected message: ", again.ToString()));
        }
        // The advice works: finish, then the next step runs.
        TANDEM_RETURN_IF_ERROR(ddp->FinishGradientSync());
        TANDEM_ASSIGN_OR_RETURN(y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(loss, SquareLoss(y));
        return ddp->Backward(loss);
      });
  ASSERT_OK(result.status());
}

TEST(DdpMisuseTest, SecondBackwardBeforeSync) {
  // World size 1: the bookkeeping (and so the error) is the same as on N
  // ranks, without buckets being reduced while the second backward writes.
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(3, 4, 2, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm);
  ASSERT_OK(ddp.status());
  absl::StatusOr<Tensor> x = Features(2, 3, 0);
  ASSERT_OK(x.status());
  absl::StatusOr<Tensor> y = (*ddp)->Forward(*x);
  ASSERT_OK(y.status());
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK(loss->Backward(BackwardOptions{.retain_graph = true}));
  ASSERT_OK(loss->Backward());
  absl::Status s = (*ddp)->FinishGradientSync();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("received a gradient twice in one synchronised step"));
  EXPECT_THAT(s.message(), HasSubstr("ddp.NoSync()"));
  // The next step is clean again.
  y = (*ddp)->Forward(*x);
  ASSERT_OK(y.status());
  loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK((*ddp)->Backward(*loss));
  EXPECT_EQ(comm.calls, 0);
}

TEST(DdpMisuseTest, BackwardWithoutDdpForward) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(3, 4, 2, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm);
  ASSERT_OK(ddp.status());
  absl::StatusOr<Tensor> x = Features(2, 3, 0);
  ASSERT_OK(x.status());

  // The inner module's output: gradients stay local; DDP refuses to "sync".
  absl::StatusOr<Tensor> y = (*model)->Forward(*x);
  ASSERT_OK(y.status());
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  absl::Status s = (*ddp)->Backward(*loss);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("Backward(loss) without a Forward to synchronise"));

  s = (*ddp)->FinishGradientSync();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("FinishGradientSync without a step to finish"));

  // A DDP Forward under NoGradGuard (evaluation) arms nothing either.
  {
    NoGradGuard no_grad;
    ASSERT_OK((*ddp)->Forward(*x).status());
  }
  s = (*ddp)->FinishGradientSync();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
}

// The step state (ddp_step.h) through a whole step, and the transitions the
// tests above do not reach.
// A world-size-1 DDP over an MLP and one batch, for the step-state tests.
class DdpStepStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Mlp(3, 4, 2, 1);
    ASSERT_OK(model_.status());
    ddp_ = DistributedDataParallel::Create(**model_, comm_);
    ASSERT_OK(ddp_.status());
    x_ = Features(2, 3, 0);
    ASSERT_OK(x_.status());
  }

  absl::StatusOr<std::unique_ptr<nn::Sequential>> model_;
  CountingCommunicator comm_;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp_;
  absl::StatusOr<Tensor> x_;
};

TEST_F(DdpStepStateTest, ForwardWhileAReductionIsOpenIsRefused) {
  auto& ddp = ddp_;
  auto& x = x_;
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kIdle);
  absl::StatusOr<Tensor> y = (*ddp)->Forward(*x);
  ASSERT_OK(y.status());
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kArmedSync);
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK(loss->Backward());  // the hooks fire; nothing finishes the step
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kReducing);

  absl::StatusOr<Tensor> again = (*ddp)->Forward(*x);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(),
              HasSubstr("Forward called before the previous iteration's "
                        "gradient reduction finished"));
  EXPECT_THAT(again.status().message(),
              HasSubstr("(Forward is not allowed in step state reducing)"));
  {
    NoGradGuard no_grad;  // evaluation is refused too: buckets may be busy
    again = (*ddp)->Forward(*x);
    EXPECT_THAT(again.status().message(),
                HasSubstr("Forward (no grad) is not allowed in step state "
                          "reducing"));
  }
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kReducing);
  ASSERT_OK((*ddp)->FinishGradientSync());
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kIdle);
  ASSERT_OK((*ddp)->Forward(*x).status());
}

TEST_F(DdpStepStateTest, NoSyncEvaluationAndDirectModuleRuns) {
  auto& ddp = ddp_;
  auto& model = model_;
  auto& x = x_;

  // The inner module run directly: its hooks leave the state idle.
  absl::StatusOr<Tensor> y = (*model)->Forward(*x);
  ASSERT_OK(y.status());
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK(loss->Backward());
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kIdle);
  absl::Status s = (*ddp)->FinishGradientSync();
  EXPECT_THAT(s.message(),
              HasSubstr("(FinishGradientSync is not allowed in step state "
                        "idle)"));

  // Forward twice before backward re-arms; a NoSync Forward re-arms local.
  ASSERT_OK((*ddp)->Forward(*x).status());
  ASSERT_OK((*ddp)->Forward(*x).status());
  EXPECT_EQ((*ddp)->step_state(), DdpStepState::kArmedSync);
  {
    DistributedDataParallel::NoSyncGuard guard = (*ddp)->NoSync();
    y = (*ddp)->Forward(*x);
    ASSERT_OK(y.status());
    EXPECT_EQ((*ddp)->step_state(), DdpStepState::kArmedLocal);
    {
      NoGradGuard no_grad;  // evaluation keeps the open step as it is
      ASSERT_OK((*ddp)->Forward(*x).status());
    }
    EXPECT_EQ((*ddp)->step_state(), DdpStepState::kArmedLocal);
    loss = SquareLoss(*y);
    ASSERT_OK(loss.status());
    ASSERT_OK((*ddp)->Backward(*loss));  // accumulates only
    EXPECT_EQ((*ddp)->step_state(), DdpStepState::kIdle);
  }
  s = (*ddp)->Backward(*loss);
  EXPECT_THAT(s.message(),
              HasSubstr("(Backward is not allowed in step state idle)"));
  EXPECT_EQ(comm_.calls, 0);
}

TEST(DdpMisuseTest, FinishWithoutBackward) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(3, 4, 2, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm);
  ASSERT_OK(ddp.status());
  absl::StatusOr<Tensor> x = Features(2, 3, 0);
  ASSERT_OK(x.status());
  ASSERT_OK((*ddp)->Forward(*x).status());
  absl::Status s = (*ddp)->FinishGradientSync();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("No gradient arrived at all"));
}

TEST(DdpMisuseTest, BackwardErrorIsReturnedWithTheRank) {
  absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(3, 4, 2, 1);
  ASSERT_OK(model.status());
  CountingCommunicator comm;
  absl::StatusOr<std::unique_ptr<DistributedDataParallel>> ddp =
      DistributedDataParallel::Create(**model, comm);
  ASSERT_OK(ddp.status());
  absl::StatusOr<Tensor> x = Features(2, 3, 0);
  ASSERT_OK(x.status());
  absl::StatusOr<Tensor> y = (*ddp)->Forward(*x);
  ASSERT_OK(y.status());
  // Non-scalar "loss": autograd refuses.
  absl::Status s = (*ddp)->Backward(*y);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(),
              HasSubstr("DistributedDataParallel on rank 0: backward failed"));
  // The iteration was abandoned cleanly.
  y = (*ddp)->Forward(*x);
  ASSERT_OK(y.status());
  absl::StatusOr<Tensor> loss = SquareLoss(*y);
  ASSERT_OK(loss.status());
  ASSERT_OK((*ddp)->Backward(*loss));
}

// ---- NoSync.

TEST(DdpNoSyncTest, AccumulatesLocallyThenReducesTheSum) {
  // Two micro-batches per rank; the first inside NoSync. The result equals
  // the average over ranks of (g_first + g_second).
  std::vector<std::vector<float>> inside(2), after(2);
  std::vector<int> launched_inside(2, -1);
  sim::RunResult result =
      sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(3, 4, 2, 1));
        TANDEM_ASSIGN_OR_RETURN(auto ddp,
                                DistributedDataParallel::Create(*model, comm));
        TANDEM_ASSIGN_OR_RETURN(Tensor x0, Features(2, 3, 10 + rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor x1, Features(2, 3, 20 + rank));
        {
          auto no_sync = ddp->NoSync();
          if (ddp->require_gradient_sync())
            return absl::InternalError("NoSync ignored");
          TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x0));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          launched_inside[rank] = static_cast<int>(ddp->num_buckets_launched());
          inside[rank] = Values(model->Parameters()[3].grad());
        }
        if (!ddp->require_gradient_sync())
          return absl::InternalError("NoSync not restored");
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x1));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
        TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
        after[rank] = Values(model->Parameters()[3].grad());
        return absl::OkStatus();
      });
  ASSERT_OK(result.status());

  std::vector<std::vector<float>> local_sum(2), local_first(2);
  for (int r = 0; r < 2; ++r) {
    absl::StatusOr<std::unique_ptr<nn::Sequential>> model = Mlp(3, 4, 2, 1);
    ASSERT_OK(model.status());
    for (uint64_t seed : {10 + r, 20 + r}) {
      absl::StatusOr<Tensor> x = Features(2, 3, seed);
      ASSERT_OK(x.status());
      absl::StatusOr<Tensor> y = (*model)->Forward(*x);
      ASSERT_OK(y.status());
      absl::StatusOr<Tensor> loss = SquareLoss(*y);
      ASSERT_OK(loss.status());
      ASSERT_OK(loss->Backward());
      if (seed < 20) local_first[r] = Values((*model)->Parameters()[3].grad());
    }
    local_sum[r] = Values((*model)->Parameters()[3].grad());
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(launched_inside[r], 0);
    EXPECT_EQ(inside[r], local_first[r]);  // purely local inside NoSync
    std::vector<float> expected(local_sum[0].size());
    for (size_t k = 0; k < expected.size(); ++k) {
      expected[k] = local_sum[0][k] * 0.5f + local_sum[1][k] * 0.5f;
    }
    EXPECT_EQ(after[r], expected) << r;
  }
}

// DdpOptions::no_sync_keeps_gradients (the virtual world's): a gradient kept
// in a buffer of the caller's stays there through a NoSync backward, and a
// synchronised backward after it still reduces the accumulated sum.
TEST(DdpNoSyncTest, KeepsGradientsWhereTheyAreWhenAsked) {
  std::vector<std::vector<float>> plain(2), kept(2);
  for (const bool keep : {false, true}) {
    sim::RunResult result =
        sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(auto model, Mlp(3, 4, 2, 1));
          DdpOptions options;
          options.no_sync_keeps_gradients = keep;
          TANDEM_ASSIGN_OR_RETURN(
              auto ddp, DistributedDataParallel::Create(*model, comm, options));
          const Tensor w = model->Parameters()[3];
          TANDEM_ASSIGN_OR_RETURN(Tensor own, Tensor::Zeros(w.shape()));
          TANDEM_RETURN_IF_ERROR(w.set_grad(own));
          TANDEM_ASSIGN_OR_RETURN(Tensor x0, Features(2, 3, 10 + rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor x1, Features(2, 3, 20 + rank));
          {
            auto no_sync = ddp->NoSync();
            TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x0));
            TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
            TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          }
          if (w.GradIsViewOf(own) != keep) {
            return absl::InternalError(absl::StrCat(
                "keep=", keep, ": the gradient ", keep ? "left" : "stayed in",
                " the caller's buffer"));
          }
          TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x1));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
          TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
          (keep ? kept : plain)[rank] = Values(w.grad());
          return absl::OkStatus();
        });
    ASSERT_OK(result.status());
  }
  EXPECT_EQ(kept, plain);
  EXPECT_EQ(kept[0], kept[1]);
}

// Module::MarkGradsZero in place of ZeroGrad (what train::Strategy does for
// DDP): the same gradients bit for bit, also for a parameter a synchronised
// step leaves unused after a NoSync step gave it a local gradient (its
// bucket view still holds that gradient in memory when marked zero).
TEST(DdpMarkGradsZeroTest, SameGradientsAsZeroGradWithUnusedParameters) {
  DdpOptions options;
  options.find_unused_parameters = true;
  options.first_bucket_cap_bytes = 8;  // one bucket per parameter
  options.bucket_cap_bytes = 8;
  // [mark][rank][step]: every parameter's gradient after each synced step.
  std::vector<std::vector<float>> grads[2][2][2];
  for (const bool mark : {false, true}) {
    sim::RunResult result =
        sim::Run(2, [&](int rank, comm::Communicator& comm) -> absl::Status {
          TANDEM_ASSIGN_OR_RETURN(auto model, PartlyUsed::Create(1));
          TANDEM_ASSIGN_OR_RETURN(
              auto ddp, DistributedDataParallel::Create(*model, comm, options));
          auto step = [&](bool use_both, uint64_t seed) -> absl::Status {
            model->use_both = use_both;
            TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(2, 3, seed));
            TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
            TANDEM_ASSIGN_OR_RETURN(Tensor loss, SquareLoss(y));
            return ddp->Backward(loss);
          };
          {
            auto no_sync = ddp->NoSync();  // every parameter: a local grad
            TANDEM_RETURN_IF_ERROR(step(true, 5 + rank));
          }
          for (int s = 0; s < 2; ++s) {
            if (mark) {
              model->MarkGradsZero();
            } else {
              model->ZeroGrad();
            }
            // Rank 1 leaves "unused" without a gradient.
            TANDEM_RETURN_IF_ERROR(step(rank == 0, 7 + s + rank));
            for (const Tensor& p : model->Parameters()) {
              grads[mark][rank][s].push_back(Values(p.grad()));
            }
          }
          return absl::OkStatus();
        });
    ASSERT_OK(result.status());
  }
  for (int rank = 0; rank < 2; ++rank) {
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(grads[true][rank][s], grads[false][rank][s]) << rank << s;
      ASSERT_EQ(grads[true][rank][s].size(), 4u);
      // Not vacuous: "unused" got rank 0's gradient (halved), not zeros.
      EXPECT_NE(grads[true][rank][s][3], std::vector<float>(2, 0.f));
    }
  }
}

}  // namespace
}  // namespace tandem::train
