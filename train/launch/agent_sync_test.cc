#include "train/launch/agent_sync.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

// A port nobody listens on now (the kernel's pick, released at once).
int FreePortForTest() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class AgentSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<comm::TcpStoreServer>> s =
        comm::TcpStoreServer::Start({.bind_address = "", .port = 0});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  AgentSyncOptions Node(int node, int nnodes = 2) {
    return {.host = "127.0.0.1",
            .port = server_->port(),
            .node_rank = node,
            .nnodes = nnodes,
            .config = "same",
            .timeout = absl::Seconds(20)};
  }
  // Connects `nnodes` agents at once (Connect is a rendezvous).
  std::vector<std::unique_ptr<AgentSync>> ConnectAll(int nnodes) {
    std::vector<absl::StatusOr<std::unique_ptr<AgentSync>>> got;
    for (int i = 0; i < nnodes; ++i) got.emplace_back(absl::UnknownError("-"));
    std::vector<std::thread> t;
    for (int i = 0; i < nnodes; ++i) {
      t.emplace_back([&, i] { got[i] = AgentSync::Connect(Node(i, nnodes)); });
    }
    for (std::thread& x : t) x.join();
    std::vector<std::unique_ptr<AgentSync>> out;
    for (auto& g : got) {
      EXPECT_TRUE(g.ok()) << g.status();
      if (g.ok()) out.push_back(std::move(*g));
    }
    return out;
  }
  std::unique_ptr<comm::TcpStoreServer> server_;
};

// Node 1 never comes: node 0's wait speaks (at least once before it gives
// up, whatever the timing), then fails naming node 1 and the flag.
TEST_F(AgentSyncTest, AMissingNodeIsNamedWhileWaitingAndAtTheEnd) {
  AgentSyncOptions o = Node(0);
  o.rdzv_timeout = absl::Milliseconds(300);
  o.stall_note_interval = absl::Milliseconds(100);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<AgentSync>> sync = AgentSync::Connect(o);
  const std::string notes = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(sync.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(sync.status())) << sync.status();
  EXPECT_THAT(sync.status().message(),
              HasSubstr("tandemrun (node 0): joining the job: node 1 of "
                        "--nnodes=2 did not come within 300ms "
                        "(--rdzv_timeout=0.3)"));
  EXPECT_THAT(notes, HasSubstr("tandemrun (node 0): still joining the job: "
                               "waiting for node 1 of --nnodes=2 since "));
  EXPECT_THAT(notes, HasSubstr("; giving up at "));
}

TEST_F(AgentSyncTest, NoNotesWhenTheIntervalIsZero) {
  AgentSyncOptions o = Node(0);
  o.rdzv_timeout = absl::Milliseconds(200);
  o.stall_note_interval = absl::ZeroDuration();
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(AgentSync::Connect(o).ok());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// A signal ends a wait at once (the default timeout is 20 s here).
TEST_F(AgentSyncTest, ASignalEndsAWait) {
  AgentSyncOptions o = Node(0);
  o.rdzv_timeout = absl::Seconds(600);
  o.interrupted = [] { return SIGTERM; };
  absl::StatusOr<std::unique_ptr<AgentSync>> sync = AgentSync::Connect(o);
  ASSERT_FALSE(sync.ok());
  EXPECT_TRUE(absl::IsCancelled(sync.status())) << sync.status();
  EXPECT_THAT(
      sync.status().message(),
      HasSubstr(
          "stopped by signal 15 (Terminated) while reaching the job's store"));
}

// Node 1 started before node 0: it says it waits for node 0's store.
TEST_F(AgentSyncTest, ANodeWithoutNodeZeroSaysSo) {
  AgentSyncOptions o = Node(1);
  o.port = FreePortForTest();
  o.rdzv_timeout = absl::Milliseconds(300);
  o.stall_note_interval = absl::Milliseconds(100);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<AgentSync>> sync = AgentSync::Connect(o);
  const std::string notes = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(sync.ok());
  EXPECT_THAT(sync.status().message(),
              HasSubstr("node 0's store did not come within 300ms"));
  EXPECT_THAT(notes, HasSubstr("waiting for node 0 (it hosts the store)"));
}

TEST_F(AgentSyncTest, TheFirstPostedFailureIsWhatEveryNodeSees) {
  std::vector<std::unique_ptr<AgentSync>> a = ConnectAll(2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(*a[0]->PostedFailure(0), std::nullopt);
  ASSERT_TRUE(a[1]->PostFailure(0, "node 1: rank 3 failed").ok());
  ASSERT_TRUE(a[0]->PostFailure(0, "node 0: rank 0 failed").ok());
  EXPECT_EQ(*a[0]->PostedFailure(0), "node 1: rank 3 failed");
  EXPECT_EQ(*a[1]->PostedFailure(0), "node 1: rank 3 failed");
  // Attempts are apart: attempt 1 starts clean.
  EXPECT_EQ(*a[0]->PostedFailure(1), std::nullopt);
  // A node that finished attempt 0 learns of the failure.
  EXPECT_EQ(*a[0]->FinishAttempt(0), "node 1: rank 3 failed");
}

TEST_F(AgentSyncTest, FinishAttemptWaitsForEveryNode) {
  std::vector<std::unique_ptr<AgentSync>> a = ConnectAll(3);
  ASSERT_EQ(a.size(), 3u);
  std::vector<absl::StatusOr<std::optional<std::string>>> done(
      3, absl::UnknownError("not run"));
  std::vector<std::thread> t;
  for (int i = 0; i < 3; ++i) {
    t.emplace_back([&, i] {
      ASSERT_TRUE(a[i]->StartAttempt(0).ok());
      done[i] = a[i]->FinishAttempt(0);
    });
  }
  for (std::thread& x : t) x.join();
  for (const auto& d : done) {
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(*d, std::nullopt);
  }
  std::thread leave1([&] { EXPECT_TRUE(a[1]->Leave().ok()); });
  std::thread leave2([&] { EXPECT_TRUE(a[2]->Leave().ok()); });
  EXPECT_TRUE(a[0]->Leave().ok());  // waits for both
  leave1.join();
  leave2.join();
}

}  // namespace
}  // namespace tandem::train
