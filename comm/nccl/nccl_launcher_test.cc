// NcclLocalLauncher: its availability (with and without a GPU) and the direct
// mode the launch registry uses (the staged mode runs the conformance suite).
#include "comm/nccl/nccl_launcher.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/nccl/local_gpus.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

TEST(NcclLocalLauncherTest, CanRunSaysWhyNot) {
  NcclLocalLauncher launcher;
  EXPECT_EQ(launcher.name(), "nccl");
  const int gpus = LocalGpuCount();
  if (gpus == 0) {
    absl::Status s = launcher.CanRun(1);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("nccl needs a CUDA device, and none was found ("));
    return;
  }
  EXPECT_TRUE(launcher.CanRun(gpus).ok());
  absl::Status s = launcher.CanRun(gpus + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("device(s) visible (CUDA_VISIBLE_DEVICES)"));
}

TEST(NcclLocalLauncherTest, DirectModeHandsOverThePreparedCommunicator) {
  if (LocalGpuCount() == 0) GTEST_SKIP() << "no CUDA device";
  std::atomic<int> prepared{0};
  NcclRankSetup setup;
  setup.stage_host_buffers = false;
  setup.prepare = [&prepared](NcclCommunicator&) {
    prepared.fetch_add(1);
    return absl::OkStatus();
  };
  NcclLocalLauncher launcher(NcclLocalLauncher::DefaultOptions(), setup);
  std::vector<RankStatus> out =
      launcher.Run(1, [](int rank, Communicator& comm) -> absl::Status {
        if (dynamic_cast<NcclCommunicator*>(&comm) == nullptr ||
            comm.device() != CommDevice::Cuda(rank)) {
          return absl::InternalError("not the rank's NcclCommunicator");
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(MostTellingStatus(out).ok()) << MostTellingStatus(out);
  EXPECT_EQ(prepared.load(), 1);
  launcher.Release();
}

}  // namespace
}  // namespace tandem::comm
