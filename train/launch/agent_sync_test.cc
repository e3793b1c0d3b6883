#include "train/launch/agent_sync.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/store/tcp_store.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

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

TEST_F(AgentSyncTest, ANodeThatNeverComesIsNamed) {
  AgentSyncOptions o = Node(0);
  o.timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<AgentSync>> alone = AgentSync::Connect(o);
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(alone.status().message().find("tandemrun (node 0): comparing the "
                                          "nodes' tandemrun flags"),
            std::string::npos)
      << alone.status();
}

}  // namespace
}  // namespace tandem::train
