// The Communicator conformance suite on NCCL: one thread per local GPU, the
// suite's host buffers staged through device memory. Every case whose world
// size exceeds the visible GPUs skips (all of them without a GPU).
#include "comm/conformance/conformance.h"

#include <memory>

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

}  // namespace
}  // namespace tandem::comm
