// FullyShardedDataParallel with mixed precision (FsdpOptions::param_dtype,
// reduce_dtype) against a serial reference computed in this file:
//   - per rank, the same model with its parameters rounded to bf16 from the
//     f32 masters runs forward and backward on that rank's batch (the same
//     kernels FSDP's units run, so each rank's bf16 gradients are equal);
//   - the gradients are combined as PyTorch FSDP does: cast to the reduce
//     dtype, divided by the pre-divide factor, summed in rank order (in f32,
//     rounded once to the reduce dtype: comm's reduction contract), divided
//     by the post-divide factor, widened to f32;
//   - an f32 Sgd with momentum steps the masters.
// Every operation is the same, in the same order, so the masters must agree
// bit for bit at world sizes 1, 2, 3, 4 (units of 42, 32 and 15 elements:
// 15 is odd, 32 does not divide by 3, 42 and 15 not by 4). Also: traffic
// per step halves, the gathered unit's memory halves, GradScaler with the
// found-inf combiner skips on every rank together, and bad options.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/half.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/traffic_counter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/allocator.h"
#include "tensor/amp/autocast.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/grad_scaler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/core/found_inf.h"
#include "train/parallel/sharded/fsdp.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

constexpr int kSteps = 3;

absl::StatusOr<std::unique_ptr<nn::Sequential>> Mlp() {
  Generator gen(11);
  auto model = std::make_unique<nn::Sequential>();
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(5, 7, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(7, 4, gen)));
  TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(4, 3, gen)));
  return model;
}

absl::StatusOr<Tensor> Features(int step, int rank) {
  Generator gen(1000 + 10 * step + rank);
  std::vector<float> values(4 * 5);
  gen.Uniform(values.data(), static_cast<int64_t>(values.size()), -1.f, 1.f);
  return Tensor::FromVector(values, {4, 5});
}

// mean(y^2); under autocast Mean runs in f32.
absl::StatusOr<Tensor> Loss(const Tensor& y) {
  TANDEM_ASSIGN_OR_RETURN(Tensor sq, Mul(y, y));
  return Mean(sq);
}

absl::StatusOr<optim::Sgd> MakeSgd(std::vector<Tensor> params) {
  return optim::Sgd::Create(std::move(params), 0.05,
                            {.momentum = 0.9, .weight_decay = 1e-3});
}

absl::StatusOr<std::vector<uint32_t>> Bits(const nn::StateDict& state) {
  std::vector<uint32_t> out;
  for (const nn::NamedTensor& e : state) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, e.tensor.ToVector<float>());
    for (float f : v) out.push_back(std::bit_cast<uint32_t>(f));
  }
  return out;
}

struct Case {
  int world = 1;
  DType reduce = DType::kBF16;
  bool autocast = false;
};

// Forward and loss of `fn` under bf16 autocast when asked.
absl::StatusOr<Tensor> LossOf(
    const Case& c, const std::function<absl::StatusOr<Tensor>()>& fn) {
  std::optional<amp::Autocast> region;
  if (c.autocast) region.emplace(DeviceType::kCPU, DType::kBF16);
  TANDEM_ASSIGN_OR_RETURN(Tensor y, fn());
  return Loss(y);
}

// The FSDP run: every rank's final masters (FullStateDict), as bits.
absl::StatusOr<std::vector<std::vector<uint32_t>>> TrainFsdp(const Case& c) {
  std::vector<std::vector<uint32_t>> out(c.world);
  sim::RunResult result = sim::Run(
      c.world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(auto fsdp, FullyShardedDataParallel::Create(
                                               *model, comm,
                                               {.param_dtype = DType::kBF16,
                                                .reduce_dtype = c.reduce}));
        TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                                MakeSgd(fsdp->ShardParameters()));
        for (int step = 0; step < kSteps; ++step) {
          sgd.ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(step, rank));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                                  LossOf(c, [&] { return fsdp->Forward(x); }));
          TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
          TANDEM_RETURN_IF_ERROR(sgd.Step());
        }
        TANDEM_ASSIGN_OR_RETURN(nn::StateDict state, fsdp->FullStateDict());
        for (const nn::NamedTensor& e : state) {
          if (e.tensor.dtype() != DType::kF32) {
            return absl::InternalError(
                absl::StrCat(e.name, " is not f32 in FullStateDict"));
          }
        }
        TANDEM_ASSIGN_OR_RETURN(out[rank], Bits(state));
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(result.status());
  return out;
}

float RoundTo(DType dtype, float v) {
  return dtype == DType::kBF16 ? half::F32FromBF16(half::BF16FromF32(v)) : v;
}

// The serial reference (see the file comment): the masters' bits.
absl::StatusOr<std::vector<uint32_t>> TrainReference(const Case& c) {
  TANDEM_ASSIGN_OR_RETURN(auto master, Mlp());
  TANDEM_ASSIGN_OR_RETURN(auto low, Mlp());
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd, MakeSgd(master->Parameters()));
  const auto [pre, post] = FsdpGradientDivideFactors(c.world);
  const std::vector<Tensor> masters = master->Parameters();
  const std::vector<Tensor> lows = low->Parameters();
  for (int step = 0; step < kSteps; ++step) {
    // sums[k][i]: parameter k's element i, summed over ranks in f32.
    std::vector<std::vector<float>> sums(masters.size());
    for (int rank = 0; rank < c.world; ++rank) {
      for (size_t k = 0; k < lows.size(); ++k) {
        TANDEM_ASSIGN_OR_RETURN(Tensor rounded, masters[k].To(DType::kBF16));
        lows[k].ClearGrad();
        TANDEM_RETURN_IF_ERROR(lows[k].SetDataWithDtype(rounded));
      }
      TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(step, rank));
      TANDEM_ASSIGN_OR_RETURN(x, x.To(DType::kBF16));
      TANDEM_ASSIGN_OR_RETURN(Tensor loss,
                              LossOf(c, [&] { return low->Forward(x); }));
      TANDEM_RETURN_IF_ERROR(loss.Backward());
      for (size_t k = 0; k < lows.size(); ++k) {
        TANDEM_ASSIGN_OR_RETURN(Tensor g, lows[k].grad().To(DType::kF32));
        TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, g.ToVector<float>());
        if (sums[k].empty()) sums[k].assign(v.size(), 0.f);
        for (size_t i = 0; i < v.size(); ++i) {
          // The rank's contribution: in the reduce dtype, pre-divided
          // there (float division, rounded).
          const float mine = RoundTo(
              c.reduce, RoundTo(c.reduce, v[i]) / static_cast<float>(pre));
          sums[k][i] = rank == 0 ? mine : sums[k][i] + mine;
        }
      }
    }
    for (size_t k = 0; k < masters.size(); ++k) {
      std::vector<float> g(sums[k].size());
      for (size_t i = 0; i < g.size(); ++i) {
        const float reduced = RoundTo(c.reduce, sums[k][i]);
        g[i] = RoundTo(c.reduce, reduced / static_cast<float>(post));
      }
      TANDEM_ASSIGN_OR_RETURN(Tensor grad,
                              Tensor::FromVector(g, masters[k].shape()));
      TANDEM_RETURN_IF_ERROR(masters[k].set_grad(grad));
    }
    TANDEM_RETURN_IF_ERROR(sgd.Step());
  }
  return Bits(master->StateDict());
}

class FsdpMixedPrecisionTest
    : public ::testing::TestWithParam<std::tuple<int, DType, bool>> {};

TEST_P(FsdpMixedPrecisionTest, MastersEqualTheSerialReferenceBitForBit) {
  const auto [world, reduce, autocast] = GetParam();
  const Case c{.world = world, .reduce = reduce, .autocast = autocast};
  absl::StatusOr<std::vector<std::vector<uint32_t>>> fsdp = TrainFsdp(c);
  ASSERT_TRUE(fsdp.ok()) << fsdp.status();
  absl::StatusOr<std::vector<uint32_t>> reference = TrainReference(c);
  ASSERT_TRUE(reference.ok()) << reference.status();
  absl::StatusOr<std::unique_ptr<nn::Sequential>> initial = Mlp();
  ASSERT_TRUE(initial.ok());
  absl::StatusOr<std::vector<uint32_t>> start = Bits((*initial)->StateDict());
  ASSERT_TRUE(start.ok());
  EXPECT_NE(*reference, *start);  // it trained
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ((*fsdp)[rank], *reference) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, FsdpMixedPrecisionTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(DType::kBF16,
                                                              DType::kF32),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return absl::StrCat(
                               "world", std::get<0>(info.param), "_reduce_",
                               DTypeName(std::get<1>(info.param)),
                               std::get<2>(info.param) ? "_autocast" : "");
                         });

TEST(FsdpMixedPrecisionTest, DivideFactorsArePyTorchs) {
  using P = std::pair<double, double>;
  EXPECT_EQ(FsdpGradientDivideFactors(1), P(1, 1));
  EXPECT_EQ(FsdpGradientDivideFactors(2), P(2, 1));
  EXPECT_EQ(FsdpGradientDivideFactors(3), P(2, 1.5));
  EXPECT_EQ(FsdpGradientDivideFactors(4), P(2, 2));
  EXPECT_EQ(FsdpGradientDivideFactors(8), P(4, 2));
  EXPECT_EQ(FsdpGradientDivideFactors(16), P(4, 4));
}

// Bytes rank 0 puts on the wire in one training step.
absl::StatusOr<int64_t> StepTraffic(const FsdpOptions& options) {
  int64_t bytes = 0;
  sim::RunResult result =
      sim::Run(4, [&](int rank, comm::Communicator& inner) -> absl::Status {
        comm::TrafficCounter comm(inner);
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(
            auto fsdp, FullyShardedDataParallel::Create(*model, comm, options));
        comm.bytes = 0;  // after Create's broadcasts
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(0, rank));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Loss(y));
        TANDEM_RETURN_IF_ERROR(fsdp->Backward(loss));
        if (rank == 0) bytes = comm.bytes;
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(result.status());
  return bytes;
}

TEST(FsdpMixedPrecisionTest, Bf16HalvesTheBytesOnTheWire) {
  absl::StatusOr<int64_t> f32 = StepTraffic({});
  absl::StatusOr<int64_t> bf16 = StepTraffic({.param_dtype = DType::kBF16});
  absl::StatusOr<int64_t> bf16_f32 =
      StepTraffic({.param_dtype = DType::kBF16, .reduce_dtype = DType::kF32});
  ASSERT_TRUE(f32.ok() && bf16.ok() && bf16_f32.ok());
  // Padded units at 4 ranks: 44 + 32 + 16 = 92 elements, each gathered
  // twice (forward, backward) and reduce-scattered once: 3 x 92 x 4 bytes.
  EXPECT_EQ(*f32, 3 * 92 * 4);
  EXPECT_EQ(*bf16 * 2, *f32);
  // Gathers in bf16, gradients in f32.
  EXPECT_EQ(*bf16_f32, 2 * 92 * 2 + 92 * 4);
}

// A host allocator that counts, per rank (the thread's ScopedRank), the
// bytes in use and their peak. Test-local: train/ may not depend on bench/.
class CountingAllocator : public Allocator {
 public:
  absl::StatusOr<void*> Allocate(Device device, int64_t nbytes) override {
    TANDEM_ASSIGN_OR_RETURN(void* p, inner_->Allocate(device, nbytes));
    std::lock_guard<std::mutex> lock(mu_);
    if (current_rank >= 0 && p != nullptr) {
      owner_[p] = {current_rank, nbytes};
      in_use_[current_rank] += nbytes;
      peak_[current_rank] =
          std::max(peak_[current_rank], in_use_[current_rank]);
    }
    return p;
  }
  void Deallocate(Device device, void* ptr, int64_t nbytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = owner_.find(ptr);
      if (it != owner_.end()) {
        in_use_[it->second.first] -= it->second.second;
        owner_.erase(it);
      }
    }
    inner_->Deallocate(device, ptr, nbytes);
  }
  absl::Status CopyBytes(void* dst, Device dst_device, const void* src,
                         Device src_device, int64_t nbytes) override {
    return inner_->CopyBytes(dst, dst_device, src, src_device, nbytes);
  }
  void ResetPeak(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    peak_[rank] = in_use_[rank];
  }
  int64_t InUse(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_[rank];
  }
  int64_t Peak(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_[rank];
  }

  static thread_local int current_rank;

 private:
  std::shared_ptr<Allocator> inner_ = CpuAllocator();
  std::mutex mu_;
  std::unordered_map<void*, std::pair<int, int64_t>> owner_;
  int64_t in_use_[8] = {};
  int64_t peak_[8] = {};
};
thread_local int CountingAllocator::current_rank = -1;

// Rank 0's peak bytes above what it held before an evaluation forward of a
// 256 x 256 Linear (one unit of 65792 elements) on one sample, at 4 ranks.
absl::StatusOr<int64_t> GatheredPeak(const FsdpOptions& options) {
  auto counter = std::make_shared<CountingAllocator>();
  TANDEM_RETURN_IF_ERROR(RegisterAllocator(DeviceType::kCPU, counter));
  int64_t peak = 0;
  sim::RunResult result =
      sim::Run(4, [&](int rank, comm::Communicator& comm) -> absl::Status {
        CountingAllocator::current_rank = rank;
        Generator gen(5);
        nn::Sequential model;
        TANDEM_RETURN_IF_ERROR(model.Append(nn::Linear::Create(256, 256, gen)));
        TANDEM_ASSIGN_OR_RETURN(
            auto fsdp, FullyShardedDataParallel::Create(model, comm, options));
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Zeros({1, 256}));
        NoGradGuard no_grad;
        const int64_t before = counter->InUse(rank);
        counter->ResetPeak(rank);
        TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
        if (rank == 0) peak = counter->Peak(rank) - before;
        CountingAllocator::current_rank = -1;
        return absl::OkStatus();
      });
  TANDEM_RETURN_IF_ERROR(RegisterAllocator(DeviceType::kCPU, CpuAllocator()));
  TANDEM_RETURN_IF_ERROR(result.status());
  return peak;
}

TEST(FsdpMixedPrecisionTest, Bf16HalvesTheGatheredUnitsMemory) {
  absl::StatusOr<int64_t> f32 = GatheredPeak({});
  absl::StatusOr<int64_t> bf16 = GatheredPeak({.param_dtype = DType::kBF16});
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  const int64_t unit = 256 * 256 + 256;  // divides by 4: no padding
  // f32: the gathered unit and the output row.
  EXPECT_EQ(*f32, unit * 4 + 256 * 4);
  // bf16: the gathered unit at half the bytes, plus what only mixed
  // precision holds while the all-gather runs: the input row cast to bf16
  // and this rank's shard cast to bf16 (unit / 4 elements, freed when the
  // gather completes, before the bf16 output row is allocated). So the
  // unit's 263168 bytes become 131584; the peak goes from 264192 to 164992
  // bytes (0.62; 0.5 + 0.5 / N + the rows in general).
  EXPECT_EQ(*bf16, 256 * 2 + unit * 2 + unit / 4 * 2);
}

TEST(FsdpMixedPrecisionTest, GradScalerSkipsOnEveryRankTogether) {
  // Rank 1's gradient shard holds an inf (an overflow only it sees): with
  // FoundInfAcrossRanks every rank skips the step and halves its scale.
  std::vector<double> scales(3);
  std::vector<std::vector<uint32_t>> after_skip(3), after_step(3);
  sim::RunResult result =
      sim::Run(3, [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        TANDEM_ASSIGN_OR_RETURN(auto fsdp, FullyShardedDataParallel::Create(
                                               *model, comm,
                                               {.param_dtype = DType::kBF16,
                                                .reduce_dtype = DType::kF32}));
        TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                                MakeSgd(fsdp->ShardParameters()));
        TANDEM_ASSIGN_OR_RETURN(optim::GradScaler scaler,
                                optim::GradScaler::Create());
        scaler.set_found_inf_combiner(FoundInfAcrossRanks(comm, Device::CPU()));
        for (int step = 0; step < 2; ++step) {
          sgd.ZeroGrad();
          TANDEM_ASSIGN_OR_RETURN(Tensor x, Features(step, rank));
          Tensor loss;
          {
            amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
            TANDEM_ASSIGN_OR_RETURN(Tensor y, fsdp->Forward(x));
            TANDEM_ASSIGN_OR_RETURN(loss, Loss(y));
          }
          TANDEM_ASSIGN_OR_RETURN(Tensor scaled, scaler.Scale(loss));
          TANDEM_RETURN_IF_ERROR(fsdp->Backward(scaled));
          if (step == 0 && rank == 1) {
            fsdp->ShardParameters()[0].grad().data<float>()[0] =
                std::numeric_limits<float>::infinity();
          }
          TANDEM_ASSIGN_OR_RETURN(bool stepped, scaler.Step(sgd));
          if (stepped != (step == 1)) {
            return absl::InternalError(
                absl::StrCat("step ", step, " stepped=", stepped));
          }
          TANDEM_RETURN_IF_ERROR(scaler.Update());
          TANDEM_ASSIGN_OR_RETURN(nn::StateDict state, fsdp->FullStateDict());
          TANDEM_ASSIGN_OR_RETURN((step == 0 ? after_skip : after_step)[rank],
                                  Bits(state));
        }
        scales[rank] = scaler.scale();
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
  absl::StatusOr<std::unique_ptr<nn::Sequential>> initial = Mlp();
  ASSERT_TRUE(initial.ok());
  absl::StatusOr<std::vector<uint32_t>> start = Bits((*initial)->StateDict());
  ASSERT_TRUE(start.ok());
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(scales[rank], 32768.0) << rank;
    EXPECT_EQ(after_skip[rank], *start) << rank;  // nothing moved
    EXPECT_EQ(after_step[rank], after_step[0]) << rank;
    EXPECT_NE(after_step[rank], *start) << rank;
  }
}

TEST(FsdpMixedPrecisionTest, IntegerDtypesAreClearErrors) {
  sim::RunResult result =
      sim::Run(2, [&](int, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(auto model, Mlp());
        absl::StatusOr<std::unique_ptr<FullyShardedDataParallel>> bad =
            FullyShardedDataParallel::Create(*model, comm,
                                             {.param_dtype = DType::kI64});
        EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(bad.status().message(),
                    HasSubstr("FsdpOptions::param_dtype is i64, not a "
                              "floating dtype"));
        bad = FullyShardedDataParallel::Create(
            *model, comm,
            {.param_dtype = DType::kBF16, .reduce_dtype = DType::kI32});
        EXPECT_THAT(bad.status().message(),
                    HasSubstr("FsdpOptions::reduce_dtype is i32"));
        // Nothing was wrapped: a valid Create still works.
        TANDEM_ASSIGN_OR_RETURN(
            auto fsdp, FullyShardedDataParallel::Create(
                           *model, comm, {.param_dtype = DType::kBF16}));
        EXPECT_EQ(fsdp->units()[0].compute_dtype, DType::kBF16);
        EXPECT_EQ(fsdp->units()[0].reduce_dtype, DType::kBF16);
        EXPECT_EQ(fsdp->units()[0].master_dtype, DType::kF32);
        EXPECT_EQ(fsdp->ShardParameters()[0].dtype(), DType::kF32);
        EXPECT_EQ(model->Parameters()[0].dtype(), DType::kBF16);
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
}

}  // namespace
}  // namespace tandem::train
