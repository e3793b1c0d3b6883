#include "comm/launch_env.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::optional<LaunchEnv>> Detect(
    const std::map<std::string, std::string>& vars) {
  return DetectLaunchEnv([&](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(LaunchEnvTest, NoLauncherIsNullopt) {
  // An allocation's shell (salloc) is not a launched process.
  auto env = Detect({{"HOME", "/root"},
                     {"SLURM_JOB_ID", "7"},
                     {"SLURM_NTASKS", "4"},
                     {"OMPI_MCA_btl", "self,tcp"}});
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->has_value());
}

TEST(LaunchEnvTest, AnIncompleteSetIsAnErrorNotAPrivateWorld) {
  const std::vector<
      std::pair<std::map<std::string, std::string>, std::vector<std::string>>>
      cases = {
          {{{"RANK", "1"}},
           {"torchrun launch: RANK=1 is set but WORLD_SIZE is not"}},
          {{{"WORLD_SIZE", "two"}}, {"WORLD_SIZE=two is set but RANK is not"}},
          {{{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}},
           {"MASTER_ADDR=h, MASTER_PORT=1 are set but RANK and WORLD_SIZE are "
            "not",
            "or unset the others to run without a launcher"}},
          {{{"LOCAL_RANK", "0"}, {"TORCHELASTIC_RUN_ID", "x"}},
           {"LOCAL_RANK=0, TORCHELASTIC_RUN_ID=x are set"}},
          {{{"OMPI_COMM_WORLD_SIZE", "2"}},
           {"OpenMPI launch: OMPI_COMM_WORLD_SIZE=2 is set but "
            "OMPI_COMM_WORLD_RANK is not"}},
          {{{"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "7"}},
           {"Slurm launch: SLURM_PROCID=0 is set but SLURM_NTASKS is not"}},
      };
  for (const auto& [vars, phrases] : cases) {
    auto env = Detect(vars);
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& phrase : phrases) {
      EXPECT_THAT(std::string(env.status().message()), HasSubstr(phrase));
    }
  }
}

TEST(LaunchEnvTest, AHandStartedProcessNeedsOnlyRankAndWorldSize) {
  auto env = Detect({{"RANK", "1"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "127.0.0.1"},
                     {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.ok() && env->has_value()) << env.status();
  EXPECT_EQ((*env)->rank, 1);
  EXPECT_EQ((*env)->local_rank, 1);
  EXPECT_EQ((*env)->world_size, 2);
  auto outside = Detect({{"RANK", "5"}, {"WORLD_SIZE", "3"}});
  EXPECT_THAT(std::string(outside.status().message()),
              HasSubstr("RANK=5 is outside [0, WORLD_SIZE=3)"));
  auto one = Detect({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_EQ((*one)->world_size, 1);
}

TEST(LaunchEnvTest, Torchrun) {
  auto env = Detect({{"RANK", "3"},
                     {"LOCAL_RANK", "1"},
                     {"WORLD_SIZE", "8"},
                     {"LOCAL_WORLD_SIZE", "2"}});
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->launcher, "torchrun");
  EXPECT_EQ((*env)->rank, 3);
  EXPECT_EQ((*env)->local_rank, 1);
  EXPECT_EQ((*env)->world_size, 8);
  EXPECT_EQ((*env)->local_world_size, 2);
  EXPECT_EQ((*env)->master_addr, "");
  EXPECT_EQ((*env)->master_port, 0);
}

TEST(LaunchEnvTest, TorchrunStoreAddress) {
  auto env = Detect({{"RANK", "0"},
                     {"LOCAL_RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_ADDR", "10.0.0.1"},
                     {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->master_addr, "10.0.0.1");
  EXPECT_EQ((*env)->master_port, 29500);
  auto bad = Detect({{"RANK", "0"},
                     {"LOCAL_RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"MASTER_PORT", "70000"}});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("MASTER_PORT=70000 is not a port"));
}

TEST(LaunchEnvTest, OpenMpiAndSlurm) {
  auto mpi = Detect({{"OMPI_COMM_WORLD_RANK", "2"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                     {"OMPI_COMM_WORLD_SIZE", "4"}});
  ASSERT_TRUE(mpi.ok() && mpi->has_value());
  EXPECT_EQ((*mpi)->launcher, "OpenMPI");
  EXPECT_EQ((*mpi)->rank, 2);
  EXPECT_EQ((*mpi)->local_world_size, -1);
  auto slurm = Detect(
      {{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "6"}});
  ASSERT_TRUE(slurm.ok() && slurm->has_value());
  EXPECT_EQ((*slurm)->launcher, "Slurm");
  EXPECT_EQ((*slurm)->rank, 5);
  EXPECT_EQ((*slurm)->world_size, 6);
}

TEST(LaunchEnvTest, TorchrunWinsOverMpi) {
  auto env = Detect({{"RANK", "0"},
                     {"LOCAL_RANK", "0"},
                     {"WORLD_SIZE", "2"},
                     {"OMPI_COMM_WORLD_RANK", "1"},
                     {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                     {"OMPI_COMM_WORLD_SIZE", "2"}});
  ASSERT_TRUE(env.ok() && env->has_value());
  EXPECT_EQ((*env)->launcher, "torchrun");
}

TEST(LaunchEnvTest, MalformedValuesAreErrors) {
  auto word =
      Detect({{"RANK", "one"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_THAT(word.status().message(),
              HasSubstr("RANK='one' is not a non-negative integer"));
  auto outside = Detect(
      {{"SLURM_PROCID", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS", "4"}});
  EXPECT_THAT(outside.status().message(),
              HasSubstr("SLURM_PROCID=4 is outside [0, SLURM_NTASKS=4)"));
}

}  // namespace
}  // namespace tandem::comm
