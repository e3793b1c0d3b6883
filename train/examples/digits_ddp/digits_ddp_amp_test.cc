// digits_ddp with bf16 autocast reaches a test accuracy within one point of
// the f32 run at world sizes 1, 2 and 4 (the fidelity bar).
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "train/examples/digits_ddp/digits_ddp_lib.h"

namespace tandem::train {
namespace {

double Accuracy(int world_size, const std::string& amp,
                const std::string& shard = "none") {
  DigitsConfig config;
  config.amp = amp;
  config.shard = shard;
  std::vector<DigitsResult> results(world_size);
  sim::RunResult run =
      sim::Run(world_size, [&](int rank, comm::Communicator& comm) {
        absl::StatusOr<DigitsResult> r = RunDigitsDdp(comm, config);
        if (!r.ok()) return r.status();
        results[rank] = *r;
        return absl::OkStatus();
      });
  EXPECT_TRUE(run.ok()) << run.status();
  return results[0].test_accuracy();
}

TEST(DigitsDdpAmpTest, Bf16WithinOnePointOfF32) {
  for (int world_size : {1, 2, 4}) {
    const double f32 = Accuracy(world_size, "off");
    const double bf16 = Accuracy(world_size, "bf16");
    EXPECT_GE(f32, 0.95) << "world size " << world_size;
    EXPECT_LE(std::abs(bf16 - f32), 0.01)
        << "world size " << world_size << ": bf16 " << bf16 << ", f32 " << f32;
  }
}

// --shard=fsdp --amp=bf16: units gathered and computed in bf16 (f32 master
// shards), gradients reduced in bf16; within one point of f32 DDP.
TEST(DigitsDdpAmpTest, FsdpBf16WithinOnePointOfF32) {
  for (int world_size : {2, 4}) {
    const double f32 = Accuracy(world_size, "off");
    const double fsdp_bf16 = Accuracy(world_size, "bf16", "fsdp");
    EXPECT_LE(std::abs(fsdp_bf16 - f32), 0.01)
        << "world size " << world_size << ": fsdp bf16 " << fsdp_bf16
        << ", f32 " << f32;
  }
}

TEST(DigitsDdpAmpTest, FsdpWithF16IsRefused) {
  sim::RunResult run = sim::Run(1, [&](int, comm::Communicator& comm) {
    DigitsConfig config;
    config.amp = "f16";
    config.shard = "fsdp";
    return RunDigitsDdp(comm, config).status();
  });
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("--amp=bf16"), std::string::npos)
      << run.status();
}

}  // namespace
}  // namespace tandem::train
