// The Communicator conformance suite on NCCL: one thread per local GPU, the
// suite's host buffers staged through device memory. Every case whose world
// size exceeds the visible GPUs skips (all of them without a GPU). The
// NcclSplit cases run the suite on sub-communicators (ncclCommSplit): 2n
// GPUs split by parity into two n-rank communicators.
#include "comm/conformance/conformance.h"

#include <cstdint>
#include <memory>

#include "comm/conformance/split_launcher.h"
#include "comm/nccl/nccl_launcher.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

std::shared_ptr<NcclLocalLauncher> TheLauncher() {
  static auto* const launcher = new std::shared_ptr<NcclLocalLauncher>(
      std::make_shared<NcclLocalLauncher>());
  return *launcher;
}

// Finalises the kept NCCL communicators while CUDA is still up.
class ReleaseCommunicators : public ::testing::Environment {
 public:
  void TearDown() override { TheLauncher()->Release(); }
};

[[maybe_unused]] ::testing::Environment* const release_env =
    ::testing::AddGlobalTestEnvironment(new ReleaseCommunicators);

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    Nccl, TheLauncher(), ::tandem::comm::conformance::SuiteOptions());

// Worlds of 1 and 2 (2 and 4 GPUs): each test splits afresh, and NCCL's
// init of the children is the slow part.
::tandem::comm::conformance::SuiteOptions SplitOptions() {
  ::tandem::comm::conformance::SuiteOptions options;
  options.world_sizes = {1, 2};
  options.max_bytes = int64_t{1} << 20;
  return options;
}

TANDEM_INSTANTIATE_COMM_CONFORMANCE(
    NcclSplit,
    std::make_shared<::tandem::comm::conformance::SplitLauncher>(TheLauncher()),
    SplitOptions());

}  // namespace
}  // namespace tandem::comm
