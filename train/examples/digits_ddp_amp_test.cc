// digits_ddp with bf16 autocast reaches a test accuracy within one point of
// the f32 run at world sizes 1, 2 and 4 (the fidelity bar).
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "train/examples/digits_ddp_lib.h"

namespace tandem::train {
namespace {

double Accuracy(int world_size, std::optional<DType> amp) {
  DigitsConfig config;
  config.amp = amp;
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
    const double f32 = Accuracy(world_size, std::nullopt);
    const double bf16 = Accuracy(world_size, DType::kBF16);
    EXPECT_GE(f32, 0.95) << "world size " << world_size;
    EXPECT_LE(std::abs(bf16 - f32), 0.01)
        << "world size " << world_size << ": bf16 " << bf16 << ", f32 " << f32;
  }
}

}  // namespace
}  // namespace tandem::train
