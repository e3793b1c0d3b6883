#include "comm/gloo/gloo_launcher.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(GlooLauncherTest, RunsTheTorchrunWorldSizeOnly) {
  GlooLauncher launcher(absl::Seconds(1), Env({{"RANK", "1"},
                                               {"LOCAL_RANK", "1"},
                                               {"WORLD_SIZE", "3"},
                                               {"MASTER_ADDR", "127.0.0.1"},
                                               {"MASTER_PORT", "29500"}}));
  EXPECT_TRUE(launcher.CanRun(3).ok());
  EXPECT_THAT(launcher.CanRun(2).message(),
              HasSubstr("WORLD_SIZE=3, not 2; start it with tandemrun "
                        "--nproc_per_node=2"));
}

TEST(GlooLauncherTest, NeedsATorchrunLaunch) {
  GlooLauncher plain(absl::Seconds(1), Env({}));
  EXPECT_THAT(plain.CanRun(1).message(),
              HasSubstr("this process has none; start it with tandemrun"));
  GlooLauncher mpi(absl::Seconds(1), Env({{"OMPI_COMM_WORLD_RANK", "0"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                          {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_THAT(mpi.CanRun(2).message(), HasSubstr("has a OpenMPI one"));
  GlooLauncher no_port(absl::Seconds(1), Env({{"RANK", "0"},
                                              {"LOCAL_RANK", "0"},
                                              {"WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "127.0.0.1"}}));
  EXPECT_THAT(no_port.CanRun(2).message(), HasSubstr("MASTER_PORT=<unset>"));
}

TEST(GlooLauncherTest, PortZeroIsRefused) {
  GlooLauncher launcher(absl::Seconds(10), Env({{"RANK", "0"},
                                                {"LOCAL_RANK", "0"},
                                                {"WORLD_SIZE", "1"},
                                                {"MASTER_ADDR", "127.0.0.1"},
                                                {"MASTER_PORT", "0"}}));
  // Port 0 is refused: rank 0 would host the store somewhere nobody knows.
  EXPECT_FALSE(launcher.CanRun(1).ok());
}

}  // namespace
}  // namespace tandem::comm
