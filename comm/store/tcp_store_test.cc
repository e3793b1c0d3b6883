#include "comm/store/tcp_store.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/store/rendezvous.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<TcpStoreServer> StartServer() {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
  EXPECT_TRUE(server.ok()) << server.status();
  return std::move(*server);
}

std::unique_ptr<TcpStoreClient> Client(
    int port, absl::Duration timeout = absl::Seconds(20)) {
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect(
          {.host = "127.0.0.1", .port = port, .timeout = timeout});
  EXPECT_TRUE(client.ok()) << client.status();
  return std::move(*client);
}

TEST(TcpStoreTest, SetThenGetOnAnotherClient) {
  auto server = StartServer();
  auto a = Client(server->port());
  auto b = Client(server->port());
  ASSERT_TRUE(a->Set("k", std::string("v\0w", 3)).ok());
  absl::StatusOr<std::string> v = b->Get("k");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::string("v\0w", 3));
  ASSERT_TRUE(a->Set("k", "overwritten").ok());
  EXPECT_EQ(*b->Get("k"), "overwritten");
}

TEST(TcpStoreTest, GetBlocksUntilAnotherClientSets) {
  auto server = StartServer();
  auto getter = Client(server->port());
  std::string got;
  std::thread t([&] { got = getter->Get("late").value_or("error"); });
  auto setter = Client(server->port());
  ASSERT_TRUE(setter->Set("late", "here").ok());
  t.join();
  EXPECT_EQ(got, "here");
}

TEST(TcpStoreTest, AddIsAtomicAcrossClients) {
  auto server = StartServer();
  constexpr int kClients = 6;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&server] {
      auto client = Client(server->port());
      for (int i = 0; i < kAdds; ++i) ASSERT_TRUE(client->Add("n", 1).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  auto client = Client(server->port());
  EXPECT_EQ(*client->Add("n", 0), kClients * kAdds);
  EXPECT_EQ(*client->Get("n"), absl::StrCat(kClients * kAdds));
  EXPECT_EQ(*client->Add("fresh", -5), -5);
}

TEST(TcpStoreTest, AddOnANonNumberIsAnError) {
  auto server = StartServer();
  auto client = Client(server->port());
  ASSERT_TRUE(client->Set("word", "abc").ok());
  absl::StatusOr<int64_t> s = client->Add("word", 1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("'abc' is not an integer"));
  EXPECT_EQ(*client->Add("n", 2), 2);  // the connection is still usable
}

TEST(TcpStoreTest, WaitAndCheck) {
  auto server = StartServer();
  auto a = Client(server->port());
  auto b = Client(server->port());
  EXPECT_FALSE(*a->Check({"x", "y"}));
  std::atomic<bool> done = false;
  std::thread t([&] {
    EXPECT_TRUE(a->Wait({"x", "y"}).ok());
    done = true;
  });
  ASSERT_TRUE(b->Set("x", "1").ok());
  ASSERT_TRUE(b->Set("y", "2").ok());
  t.join();
  EXPECT_TRUE(done);
  EXPECT_TRUE(*b->Check({"x", "y"}));
}

TEST(TcpStoreTest, WaitTimesOutNamingTheMissingKeys) {
  auto server = StartServer();
  auto client = Client(server->port());
  ASSERT_TRUE(client->Set("a", "1").ok());
  absl::Status s = client->Wait({"a", "b", "c"}, absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("still missing: b, c"));
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("127.0.0.1:", server->port())));
  // The connection survives a timeout.
  EXPECT_TRUE(client->Wait({"a"}, absl::Milliseconds(50)).ok());
}

TEST(TcpStoreTest, GetTimesOut) {
  auto server = StartServer();
  auto client = Client(server->port(), absl::Milliseconds(50));
  absl::StatusOr<std::string> s = client->Get("never");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.status().message(), HasSubstr("get 'never'"));
}

TEST(TcpStoreTest, ClientConnectsBeforeTheServerIsUp) {
  // Reserve a port, free it, then start the server there after the client
  // began retrying.
  int port = 0;
  {
    auto probe = StartServer();
    port = probe->port();
  }
  std::unique_ptr<TcpStoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto s = TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = port});
    ASSERT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
  });
  auto client = Client(port);
  starter.join();
  ASSERT_TRUE(client->Set("k", "v").ok());
}

TEST(TcpStoreTest, UnreachableServerNamesTheAddress) {
  int port = 0;
  {
    auto probe = StartServer();
    port = probe->port();
  }
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect({.host = "127.0.0.1",
                               .port = port,
                               .timeout = absl::Milliseconds(100)});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("could not reach the TCP store at "
                                     "127.0.0.1:",
                                     port)));
  EXPECT_THAT(client.status().message(), HasSubstr("MASTER_ADDR/MASTER_PORT"));
}

TEST(TcpStoreTest, BadArgumentsAreRefused) {
  EXPECT_EQ(TcpStoreClient::Connect(
                {.host = "127.0.0.1", .port = 0, .timeout = absl::Seconds(1)})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStoreClient::Connect({.host = "no.such.host.invalid",
                                     .port = 1,
                                     .timeout = absl::Seconds(1)})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TcpStoreServer::Start({.bind_address = "nonsense", .port = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpStoreTest, PortInUseIsAnError) {
  auto server = StartServer();
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> second =
      TcpStoreServer::Start(
          {.bind_address = "127.0.0.1", .port = server->port()});
  EXPECT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("--master_port"));
}

TEST(TcpStoreTest, ServerStoppingFailsAWaitingClient) {
  auto server = StartServer();
  auto client = Client(server->port());
  absl::Status waited;
  std::thread t([&] { waited = client->Wait({"never"}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.reset();
  t.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waited.message(), HasSubstr("connection closed"));
}

TEST(RendezvousTest, AllRanksArrive) {
  auto server = StartServer();
  constexpr int kWorld = 4;
  std::vector<absl::Status> statuses(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto client = Client(server->port());
      statuses[r] = ArriveAndWait(*client, "job", r, kWorld);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST(RendezvousTest, AWorldThatNeverFillsNamesTheMissingRanks) {
  auto server = StartServer();
  auto r0 = Client(server->port(), absl::Milliseconds(100));
  auto r2 = Client(server->port(), absl::Milliseconds(100));
  absl::Status s0;
  std::thread t([&] { s0 = ArriveAndWait(*r0, "job", 0, 4); });
  absl::Status s2 = ArriveAndWait(*r2, "job", 2, 4);
  t.join();
  EXPECT_EQ(s0.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s0.message(), HasSubstr("rank 0 of 4: ranks 1, 3 did not "
                                      "arrive at the TCP store at 127.0.0.1:"));
  EXPECT_THAT(s2.message(), HasSubstr("ranks 1, 3 did not arrive"));
}

}  // namespace
}  // namespace tandem::comm
