// Runs under mpirun (comm/mpi/mpirun_test.sh): one process per rank. With
// one GPU per local rank, the NCCL communicator is bootstrapped over MPI and
// checked with exact values; otherwise every rank must get the same clear
// error at once (no rank left waiting in NCCL's init).
#include "comm/nccl/mpi_bootstrap.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/mpi/mpi_communicator.h"
#include "comm/nccl/device_buffer.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/staging_communicator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

NcclOptions WithTimeout(absl::Duration timeout) {
  NcclOptions options;
  options.timeout = timeout;
  return options;
}

MpiCommunicator* mpi = nullptr;

class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto created = MpiCommunicator::Create({.timeout = absl::Seconds(60)});
    ASSERT_TRUE(created.ok()) << created.status();
    owner_ = *std::move(created);
    mpi = owner_.get();
  }
  void TearDown() override {
    mpi = nullptr;
    owner_.reset();  // MPI_Finalize
  }

 private:
  std::unique_ptr<MpiCommunicator> owner_;
};

[[maybe_unused]] ::testing::Environment* const env =
    ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

bool EnoughGpus() { return LocalGpuCount() >= mpi->local_size(); }

TEST(MpiBootstrapTest, WithoutAGpuPerRankEveryRankFailsAlike) {
  ASSERT_NE(mpi, nullptr);
  if (EnoughGpus()) GTEST_SKIP() << "this node has a GPU per rank";
  // FailedPrecondition, not the 30 s timeout's DeadlineExceeded: the code
  // shows the bootstrap did not stall, without measuring time.
  auto nccl =
      CreateNcclCommunicatorFromMpi(*mpi, WithTimeout(absl::Seconds(30)));
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition)
      << nccl.status();
  EXPECT_THAT(nccl.status().message(), HasSubstr("cannot drive a GPU"));
  if (LocalGpuCount() == 0) {
    // Every rank names every rank: all of them lack a GPU here.
    std::string all;
    for (int r = 0; r < mpi->size(); ++r)
      all += (r ? ", " : "") + std::to_string(r);
    EXPECT_THAT(nccl.status().message(), HasSubstr("rank(s) " + all));
  }
  // MPI is still in step afterwards.
  std::vector<int32_t> one(1, 1);
  ASSERT_TRUE(mpi->AllReduce(HostView(absl::MakeSpan(one)), ReduceOp::kSum)
                  ->Wait()
                  .ok());
  EXPECT_EQ(one[0], mpi->size());
}

TEST(MpiBootstrapTest, OneProcessPerGpuGivesExactResults) {
  ASSERT_NE(mpi, nullptr);
  if (!EnoughGpus()) GTEST_SKIP() << "needs one GPU per local rank";
  auto created =
      CreateNcclCommunicatorFromMpi(*mpi, WithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(created.ok()) << created.status();
  NcclCommunicator& nccl = **created;
  const int n = nccl.size();
  const int r = nccl.rank();
  EXPECT_EQ(r, mpi->rank());
  EXPECT_EQ(n, mpi->size());
  EXPECT_EQ(nccl.device().ordinal, mpi->local_rank() % LocalGpuCount());

  // Device buffers directly.
  std::vector<float> x(4096);
  for (int i = 0; i < 4096; ++i) x[i] = static_cast<float>((r + 1) * (i % 5));
  auto dev = DeviceBuffer::Allocate(nccl.device().ordinal, 4096 * 4);
  ASSERT_TRUE(dev.ok()) << dev.status();
  ASSERT_TRUE(dev->CopyFromHost(x.data(), 4096 * 4).ok());
  ASSERT_TRUE(nccl.AllReduce(dev->View(DType::kF32, 0, 4096), ReduceOp::kAvg)
                  ->Wait()
                  .ok());
  ASSERT_TRUE(dev->CopyToHost(x.data(), 4096 * 4).ok());
  for (int i = 0; i < 4096; ++i) {
    const float want = static_cast<float>(i % 5) *
                       static_cast<float>(n * (n + 1) / 2) /
                       static_cast<float>(n);
    ASSERT_EQ(x[i], want) << "element " << i;
  }
  // Host buffers through staging: broadcast and a send/recv ring.
  StagingCommunicator host(nccl);
  std::vector<int64_t> b(10, r == n - 1 ? 77 : 0);
  ASSERT_TRUE(host.Broadcast(HostView(absl::MakeSpan(b)), n - 1)->Wait().ok());
  EXPECT_EQ(b, std::vector<int64_t>(10, 77));
  if (n > 1) {
    std::vector<int32_t> out(8, r), in(8, -1);
    auto s = host.Send(HostView(absl::MakeSpan(out)), (r + 1) % n);
    auto v = host.Recv(HostView(absl::MakeSpan(in)), (r + n - 1) % n);
    ASSERT_TRUE(v->Wait().ok());
    ASSERT_TRUE(s->Wait().ok());
    EXPECT_EQ(in, std::vector<int32_t>(8, (r + n - 1) % n));
  }
  EXPECT_TRUE(nccl.Barrier().ok());
}

}  // namespace
}  // namespace tandem::comm
