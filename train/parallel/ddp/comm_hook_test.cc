// The fp16/bf16 compression hooks: PyTorch's arithmetic on one bucket, and
// through DDP on the simulated cluster (every rank ends with the same
// gradients, equal to the compressed average computed by hand).
#include "train/parallel/ddp/comm_hook.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

TEST(CommHookTest, NamesRoundTrip) {
  for (DdpCommHook h : {DdpCommHook::kAllReduce, DdpCommHook::kF16Compress,
                        DdpCommHook::kBf16Compress}) {
    EXPECT_EQ(DdpCommHookFromName(DdpCommHookName(h)), h);
  }
  EXPECT_FALSE(DdpCommHookFromName("fp8_compress").has_value());
  EXPECT_EQ(WireDType(DdpCommHook::kBf16Compress), DType::kBF16);
  EXPECT_EQ(WireDType(DdpCommHook::kF16Compress), DType::kF16);
  EXPECT_FALSE(WireDType(DdpCommHook::kAllReduce).has_value());
}

TEST(CommHookTest, CompressCastsThenDividesLikePyTorch) {
  // PyTorch: bucket.to(bf16).div_(3): round(round(x) / 3), not round(x / 3).
  const float x = 1.00390625f + 0.001f;  // between bf16 neighbours
  Tensor bucket = Tensor::FromVector<float>({x, -7.0f}, {2}).value();
  Tensor wire = CompressBucket(bucket, DType::kBF16, 3).value();
  ASSERT_EQ(wire.dtype(), DType::kBF16);
  const std::vector<BFloat16> got = wire.ToVector<BFloat16>().value();
  const float rx = static_cast<float>(BFloat16(x));
  EXPECT_EQ(got[0].bits, BFloat16(rx / 3.0f).bits);
  EXPECT_EQ(got[1].bits, BFloat16(-7.0f / 3.0f).bits);
  // Decompression widens into the bucket's own storage.
  const float* storage = bucket.data<float>();
  ASSERT_TRUE(DecompressBucket(wire, bucket).ok());
  EXPECT_EQ(bucket.data<float>(), storage);
  EXPECT_EQ(bucket.ToVector<float>().value()[1],
            static_cast<float>(BFloat16(-7.0f / 3.0f)));
  EXPECT_EQ(CompressBucket(bucket, DType::kF16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Each rank: Linear(3, 2) from the same seed, input rank-dependent; the
// hook's result must equal round(sum_r round(round(g_r) / W)), the sum in
// f32 in rank order (comm's host reduction accumulates f16/bf16 in f32 and
// rounds once).
void RunCompressedDdp(DdpCommHook hook, int world) {
  const DType wire = *WireDType(hook);
  std::vector<std::vector<float>> local(world), reduced(world);
  sim::RunResult result =
      sim::Run(world, [&](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(7);
        TANDEM_ASSIGN_OR_RETURN(auto model, nn::Linear::Create(3, 2, gen));
        // Local gradient without DDP first (for the reference).
        TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::FromVector<float>(
                                              {0.1f * (rank + 1), -0.37f,
                                               1.3f + rank, 0.5f, 0.25f, -2.f},
                                              {2, 3}));
        {
          TANDEM_ASSIGN_OR_RETURN(Tensor y, model->Forward(x));
          TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(y));
          TANDEM_RETURN_IF_ERROR(loss.Backward());
          local[rank] = model->NamedParameters()[0]
                            .tensor.grad()
                            .ToVector<float>()
                            .value();
          model->NamedParameters()[0].tensor.ClearGrad();
          model->NamedParameters()[1].tensor.ClearGrad();
        }
        DdpOptions options;
        options.comm_hook = hook;
        TANDEM_ASSIGN_OR_RETURN(
            auto ddp, DistributedDataParallel::Create(*model, comm, options));
        TANDEM_ASSIGN_OR_RETURN(Tensor y, ddp->Forward(x));
        TANDEM_ASSIGN_OR_RETURN(Tensor loss, Sum(y));
        TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
        TANDEM_ASSIGN_OR_RETURN(
            reduced[rank],
            model->NamedParameters()[0].tensor.grad().ToVector<float>());
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.status().ok()) << result.status();
  auto round = [&](float v) {
    return wire == DType::kBF16 ? static_cast<float>(BFloat16(v))
                                : static_cast<float>(Half(v));
  };
  for (size_t i = 0; i < local[0].size(); ++i) {
    float sum = 0;
    for (int r = 0; r < world; ++r) {
      sum += round(round(local[r][i]) / static_cast<float>(world));
    }
    sum = round(sum);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(reduced[r][i], sum) << "element " << i << " rank " << r;
    }
  }
}

TEST(CommHookTest, Bf16CompressThroughDdp) {
  RunCompressedDdp(DdpCommHook::kBf16Compress, 2);
  RunCompressedDdp(DdpCommHook::kBf16Compress, 3);
}

TEST(CommHookTest, F16CompressThroughDdp) {
  RunCompressedDdp(DdpCommHook::kF16Compress, 2);
  RunCompressedDdp(DdpCommHook::kF16Compress, 3);
}

}  // namespace
}  // namespace tandem::train
