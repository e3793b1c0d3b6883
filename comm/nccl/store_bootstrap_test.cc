// CreateNcclCommunicatorFromStore with its ranks as threads of one process
// over a store on localhost. Without a GPU every rank fails alike, naming
// the ranks that cannot drive one; with GPUs (tag "gpu") the communicators
// all-reduce.
#include "comm/nccl/store_bootstrap.h"

#include <thread>
#include <vector>

#include "comm/nccl/cuda_probe.h"
#include "comm/store/tcp_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

std::vector<absl::StatusOr<std::unique_ptr<NcclCommunicator>>> Bootstrap(
    int n, int local_size) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
  EXPECT_TRUE(server.ok());
  std::vector<absl::StatusOr<std::unique_ptr<NcclCommunicator>>> comms;
  for (int r = 0; r < n; ++r) comms.emplace_back(absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<TcpStoreClient>> client =
          TcpStoreClient::Connect({.host = "127.0.0.1",
                                   .port = (*server)->port(),
                                   .timeout = absl::Seconds(60)});
      if (!client.ok()) {
        comms[r] = client.status();
        return;
      }
      comms[r] =
          CreateNcclCommunicatorFromStore(**client, {.rank = r,
                                                     .size = n,
                                                     .local_rank = r,
                                                     .local_size = local_size,
                                                     .prefix = "test"});
    });
  }
  for (std::thread& t : threads) t.join();
  return comms;
}

int Gpus() {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  return probe.ok() ? probe->device_count : 0;
}

TEST(NcclStoreBootstrapTest, WithoutAGpuEveryRankFailsAlike) {
  if (Gpus() > 0) GTEST_SKIP() << "a GPU is visible";
  auto comms = Bootstrap(2, 2);
  for (const auto& c : comms) {
    EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(c.status().message(),
                HasSubstr("rank(s) 0, 1 cannot drive a GPU, so no NCCL "
                          "communicator was created; this rank: "));
  }
}

TEST(NcclStoreBootstrapTest, MoreRanksThanGpusFailsAlike) {
  const int gpus = Gpus();
  if (gpus == 0) GTEST_SKIP() << "no GPU";
  auto comms = Bootstrap(1, gpus + 1);
  EXPECT_THAT(comms[0].status().message(),
              HasSubstr("visible GPU(s); start at most one rank per GPU"));
}

TEST(NcclStoreBootstrapTest, OneRankPerGpuAllReduces) {
  const int gpus = Gpus();
  if (gpus == 0) GTEST_SKIP() << "no GPU";
  auto comms = Bootstrap(gpus, gpus);
  for (auto& c : comms) {
    ASSERT_TRUE(c.ok()) << c.status();
  }
  // A world was created on every GPU; its ranks and devices are right.
  for (int r = 0; r < gpus; ++r) {
    EXPECT_EQ((*comms[r])->rank(), r);
    EXPECT_EQ((*comms[r])->size(), gpus);
    EXPECT_EQ((*comms[r])->device().ordinal, r);
  }
}

TEST(NcclStoreBootstrapTest, BadWorldIsAnError) {
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server =
      TcpStoreServer::Start({.bind_address = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.ok());
  auto client = TcpStoreClient::Connect({.host = "127.0.0.1",
                                         .port = (*server)->port(),
                                         .timeout = absl::Seconds(5)});
  ASSERT_TRUE(client.ok());
  auto c = CreateNcclCommunicatorFromStore(
      **client,
      {.rank = 2, .size = 2, .local_rank = 0, .local_size = 1, .prefix = "x"});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::comm
