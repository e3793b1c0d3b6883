#include "comm/store/launch_store.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

TEST(LaunchStoreTest, AgentStoreKeysAreUnderTheAttempt) {
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(*AgentStorePrefix(), "/worker/attempt_0/");
  ::setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
  EXPECT_EQ(*AgentStorePrefix(), "/worker/attempt_3/");
  ::setenv("TORCHELASTIC_RESTART_COUNT", "-1", 1);
  absl::StatusOr<std::string> bad = AgentStorePrefix();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("TORCHELASTIC_RESTART_COUNT='-1'"),
            std::string::npos);
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
}

TEST(LaunchStoreTest, OnlyTheAgentsStoreHasAPrefix) {
  ::setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "", .port = 0});
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<LaunchStore> agent =
      ConnectLaunchStore({.master_addr = "127.0.0.1",
                          .master_port = (*server)->port(),
                          .rank = 1,
                          .agent_store = true},
                         absl::Seconds(30));
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_EQ(agent->prefix, "/worker/attempt_2/");
  EXPECT_EQ(agent->server, nullptr);
  absl::StatusOr<LaunchStore> plain =
      ConnectLaunchStore({.master_addr = "127.0.0.1",
                          .master_port = (*server)->port(),
                          .rank = 1,
                          .agent_store = false},
                         absl::Seconds(30));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->prefix, "");
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
}

}  // namespace
}  // namespace tandem::comm
