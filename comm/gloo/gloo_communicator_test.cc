// GlooCommunicator with its ranks as threads of one process (each its own
// communicator and store client, over real TCP on localhost). The full
// contract is checked by the conformance suite under tandemrun
// (conformance_np*_test); this covers bootstrap, errors and the basics
// quickly and runs under TSan.
#include "comm/gloo/gloo_communicator.h"

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm/store/tcp_store.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

// Runs fn(comm) on `n` threads, one communicator each; returns each rank's
// status (Create's error when it failed).
std::vector<absl::Status> RunRanks(
    int n, const std::function<absl::Status(GlooCommunicator&)>& fn,
    absl::Duration timeout = absl::Seconds(30), int arriving = -1,
    absl::Duration stall_note_interval = absl::Seconds(30)) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
  EXPECT_TRUE(server.ok());
  std::vector<absl::Status> statuses(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  const int started = arriving < 0 ? n : arriving;
  for (int r = 0; r < started; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
          TcpStoreClient::Connect({.host = "127.0.0.1",
                                   .port = (*server)->port(),
                                   .timeout = timeout});
      if (!client.ok()) {
        statuses[r] = client.status();
        return;
      }
      GlooOptions options;
      options.rank = r;
      options.size = n;
      options.store = client->get();
      options.prefix = "test";
      options.timeout = timeout;
      options.stall_note_interval = stall_note_interval;
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
          GlooCommunicator::Create(options);
      statuses[r] = comm.ok() ? fn(**comm) : comm.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
  }
}

TEST(GlooCommunicatorTest, AllReduceSumsAndAverages) {
  ExpectAllOk(RunRanks(3, [](GlooCommunicator& comm) -> absl::Status {
    EXPECT_EQ(comm.backend(), "gloo");
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = comm.rank() + 1.0f + i;
    if (absl::Status s =
            comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
        !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != 6.0f + 3.0f * i) return absl::InternalError("bad sum");
    }
    std::vector<double> d = {static_cast<double>(comm.rank())};
    if (absl::Status s =
            comm.AllReduce(HostView(absl::MakeSpan(d)), ReduceOp::kAvg)->Wait();
        !s.ok()) {
      return s;
    }
    return d[0] == 1.0 ? absl::OkStatus() : absl::InternalError("bad avg");
  }));
}

TEST(GlooCommunicatorTest, GatherScatterBroadcastAndRing) {
  ExpectAllOk(RunRanks(4, [](GlooCommunicator& comm) -> absl::Status {
    const int r = comm.rank();
    const int n = comm.size();
    std::vector<int64_t> mine = {r, 10 * r};
    std::vector<int64_t> all(static_cast<size_t>(2 * n));
    std::unique_ptr<Work> gather = comm.AllGather(
        HostView(absl::MakeSpan(mine)), HostView(absl::MakeSpan(all)));
    std::vector<int32_t> send(static_cast<size_t>(n), r + 1);
    std::vector<int32_t> slice(1);
    std::unique_ptr<Work> scatter =
        comm.ReduceScatter(HostView(absl::MakeSpan(send)),
                           HostView(absl::MakeSpan(slice)), ReduceOp::kMax);
    std::vector<float> b = {r == 2 ? 42.0f : 0.0f};
    std::unique_ptr<Work> bcast =
        comm.Broadcast(HostView(absl::MakeSpan(b)), 2);
    // A ring of Send-then-Recv: must not deadlock.
    std::vector<int64_t> out = {100 + r};
    std::vector<int64_t> in = {-1};
    std::unique_ptr<Work> sent =
        comm.Send(HostView(absl::MakeSpan(out)), (r + 1) % n);
    std::unique_ptr<Work> got =
        comm.Recv(HostView(absl::MakeSpan(in)), (r + n - 1) % n);
    for (Work* w :
         {gather.get(), scatter.get(), bcast.get(), sent.get(), got.get()}) {
      if (absl::Status s = w->Wait(); !s.ok()) return s;
    }
    if (absl::Status s = comm.Barrier(); !s.ok()) return s;
    for (int q = 0; q < n; ++q) {
      if (all[2 * q] != q || all[2 * q + 1] != 10 * q) {
        return absl::InternalError("bad all-gather");
      }
    }
    if (slice[0] != n) return absl::InternalError("bad reduce-scatter");
    if (b[0] != 42.0f) return absl::InternalError("bad broadcast");
    if (in[0] != 100 + (r + n - 1) % n) return absl::InternalError("bad recv");
    EXPECT_TRUE(got->IsCompleted());
    EXPECT_EQ(
        got->record().fp.DebugString(),
        absl::StrCat("#0 Recv(i64 x 1, from rank ", (r + n - 1) % n, ")"));
    return absl::OkStatus();
  }));
}

TEST(GlooCommunicatorTest, HalfPrecisionReducesInF32) {
  ExpectAllOk(RunRanks(2, [](GlooCommunicator& comm) -> absl::Status {
    // bf16 0x3f80 is 1.0; the sum of two ranks is 2.0 (0x4000).
    std::vector<uint16_t> v = {0x3f80, 0x3f80};
    BufferView view{v.data(), 2, DType::kBF16, MemorySpace::kHost, -1};
    if (absl::Status s = comm.AllReduce(view, ReduceOp::kSum)->Wait();
        !s.ok()) {
      return s;
    }
    return v[0] == 0x4000 && v[1] == 0x4000
               ? absl::OkStatus()
               : absl::InternalError("bad bf16 sum");
  }));
}

TEST(GlooCommunicatorTest, ArgumentErrorsComeBackThroughWait) {
  ExpectAllOk(RunRanks(2, [](GlooCommunicator& comm) -> absl::Status {
    std::vector<int32_t> v = {1};
    absl::Status s =
        comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kAvg)->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    s = comm.Send(HostView(absl::MakeSpan(v)), comm.rank())->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    // Still usable.
    return comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
  }));
}

TEST(GlooCommunicatorTest, DisagreeingRanksFailTheCollectiveNamingBoth) {
  std::vector<absl::Status> statuses =
      RunRanks(3, [](GlooCommunicator& comm) -> absl::Status {
        // Rank 2 reduces one element more than ranks 0 and 1.
        std::vector<float> v(comm.rank() == 2 ? 5 : 4, 1.0f);
        absl::Status s =
            comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
        EXPECT_EQ(v[0], 1.0f) << "no data may move on a mismatch";
        if (!s.ok()) {
          // The communicator stays usable: the next collective agrees.
          std::vector<float> w(3, 1.0f);
          EXPECT_TRUE(
              comm.AllReduce(HostView(absl::MakeSpan(w)), ReduceOp::kSum)
                  ->Wait()
                  .ok());
          EXPECT_EQ(w[0], 3.0f);
        }
        return s;
      });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kFailedPrecondition)
        << statuses[r];
    EXPECT_THAT(statuses[r].message(),
                HasSubstr(absl::StrCat(
                    "gloo: collective mismatch seen on rank ", r,
                    ": ranks 0, 1 issued #0 AllReduce(f32 x 4, sum); rank 2 "
                    "issued #0 AllReduce(f32 x 5, sum)")));
  }
}

TEST(GlooCommunicatorTest, ListensOnANamedInterface) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect({.host = "127.0.0.1",
                               .port = (*server)->port(),
                               .timeout = absl::Seconds(30)});
  ASSERT_TRUE(client.ok());
  GlooOptions options;
  options.store = client->get();
  options.prefix = "lo";
  options.iface = "lo";
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create(options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> v = {2.0f};
  EXPECT_TRUE((*comm)
                  ->AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)
                  ->Wait()
                  .ok());

  options.prefix = "typo";
  options.iface = "nosuchif0";
  comm = GlooCommunicator::Create(options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(comm.status().message(),
              HasSubstr("network interface 'nosuchif0' (GlooOptions::iface or "
                        "GLOO_SOCKET_IFNAME) does not exist"));
}

TEST(GlooCommunicatorTest, AWorldThatNeverFillsNamesTheMissingRank) {
  std::vector<absl::Status> statuses = RunRanks(
      3, [](GlooCommunicator&) { return absl::OkStatus(); },
      absl::Milliseconds(300), /*arriving=*/2);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("rank 2 did not arrive at the TCP store at "
                        "127.0.0.1:"));
}

TEST(GlooCommunicatorTest, APeerThatLeavesFailsTheOthers) {
  std::vector<absl::Status> statuses = RunRanks(
      2,
      [](GlooCommunicator& comm) -> absl::Status {
        if (comm.rank() == 1) return absl::OkStatus();  // leaves at once
        std::vector<float> v(16, 1.0f);
        absl::Status s = absl::OkStatus();
        // Its communicator is destroyed when it returns: the all-reduce
        // fails (connection closed) or times out, never hangs.
        s = comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
        absl::Status later =
            comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
        EXPECT_EQ(later.code(), absl::StatusCode::kAborted) << later;
        return s;
      },
      absl::Seconds(2));
  EXPECT_TRUE(statuses[1].ok());
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("gloo rank 0: #0 AllReduce(f32 x 16, sum) failed"));
}

// Issue 25: a gloo rank that stops (SIGSTOP, a hang) used to leave the
// others silent until the timeout, whose error named only the waiting rank.
// Now rank 0 prints the stall note naming the missing rank, and the error
// names it too. Rank 1 here connects and then never issues the collective
// (it waits, bounded, until rank 0 is done).
TEST(GlooStallNoteTest, NamesTheRankThatNeverIssuesTheCollective) {
  std::atomic<bool> rank0_done{false};
  absl::Status rank0_status;
  ::testing::internal::CaptureStderr();
  std::vector<absl::Status> statuses = RunRanks(
      2,
      [&](GlooCommunicator& comm) -> absl::Status {
        if (comm.rank() == 1) {
          const absl::Time give_up = absl::Now() + absl::Seconds(60);
          while (!rank0_done.load() && absl::Now() < give_up) {
            absl::SleepFor(absl::Milliseconds(10));
          }
          return absl::OkStatus();
        }
        std::vector<float> v(4, 1.0f);
        rank0_status =
            comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
        rank0_done.store(true);
        return absl::OkStatus();
      },
      /*timeout=*/absl::Seconds(3), /*arriving=*/-1,
      /*stall_note_interval=*/absl::Milliseconds(100));
  const std::string err = ::testing::internal::GetCapturedStderr();
  ExpectAllOk(statuses);
  EXPECT_FALSE(rank0_status.ok());
  EXPECT_THAT(err, HasSubstr("rank 0: still waiting for #0 AllReduce(f32 x 4, "
                             "sum)"));
  EXPECT_THAT(err, HasSubstr("not yet reached by rank 1"));
  EXPECT_THAT(err, HasSubstr("timeout in"));
  EXPECT_THAT(std::string(rank0_status.message()),
              HasSubstr("rank 1 had not reached #0 AllReduce"));
}

TEST(GlooStallNoteTest, RendezvousNamesTheRankThatNeverJoins) {
  ::testing::internal::CaptureStderr();
  std::vector<absl::Status> statuses = RunRanks(
      2, [](GlooCommunicator&) { return absl::OkStatus(); },
      /*timeout=*/absl::Seconds(2), /*arriving=*/1,
      /*stall_note_interval=*/absl::Milliseconds(100));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(err, HasSubstr("rank 0: still waiting for the rendezvous of 2 "
                             "ranks"));
  EXPECT_THAT(err, HasSubstr("not yet arrived: rank 1;"));
}

TEST(GlooStallNoteTest, ANegativeIntervalIsRefused) {
  GlooOptions options;
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
      TcpStoreClient::Connect({.host = "127.0.0.1", .port = (*server)->port()});
  ASSERT_TRUE(client.ok());
  options.store = client->get();
  options.stall_note_interval = absl::Seconds(-1);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
      GlooCommunicator::Create(options);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(comm.status().message(), HasSubstr("stall_note_interval"));
}

}  // namespace
}  // namespace tandem::comm
