// Runs under mpirun (see mpirun_test.sh): every process is one rank and runs
// the same tests; collective results are checked exactly on every rank.
#include "comm/mpi/mpi_communicator.h"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/types/span.h"
#include "base/half.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

// One communicator for the whole process (MPI can be initialised once).
MpiCommunicator* comm = nullptr;

class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto created = MpiCommunicator::Create({.timeout = absl::Seconds(60)});
    ASSERT_TRUE(created.ok()) << created.status();
    owner_ = *std::move(created);
    comm = owner_.get();
  }
  void TearDown() override {
    comm = nullptr;
    owner_.reset();  // MPI_Finalize
  }

 private:
  std::unique_ptr<MpiCommunicator> owner_;
};

TEST(MpiCommunicatorTest, RanksAndSizes) {
  EXPECT_EQ(comm->backend(), "mpi");
  EXPECT_EQ(comm->device(), CommDevice::Host());
  EXPECT_GE(comm->size(), 1);
  EXPECT_GE(comm->rank(), 0);
  EXPECT_LT(comm->rank(), comm->size());
  EXPECT_GE(comm->local_rank(), 0);
  EXPECT_LT(comm->local_rank(), comm->local_size());
  // Everything runs on one node here.
  EXPECT_EQ(comm->local_size(), comm->size());
}

TEST(MpiCommunicatorTest, AllReduceEveryOpOnFloatsAndIntegers) {
  const int n = comm->size();
  const int r = comm->rank();
  for (ReduceOp op : kAllReduceOps) {
    std::vector<float> f(1000);
    for (int i = 0; i < 1000; ++i)
      f[i] = static_cast<float>((r + 1) * (i % 7 + 1));
    ASSERT_TRUE(comm->AllReduce(HostView(absl::MakeSpan(f)), op)->Wait().ok());
    for (int i = 0; i < 1000; ++i) {
      const float base = static_cast<float>(i % 7 + 1);
      float want = 0;
      switch (op) {
        case ReduceOp::kSum:
          want = base * n * (n + 1) / 2;
          break;
        case ReduceOp::kAvg:
          want = base * n * (n + 1) / 2 / n;
          break;
        case ReduceOp::kMax:
          want = base * n;
          break;
        case ReduceOp::kMin:
          want = base;
          break;
        case ReduceOp::kProd: {
          want = 1;
          for (int k = 1; k <= n; ++k) want *= base * k;
          break;
        }
        case ReduceOp::kTreeSum:  // not among kAllReduceOps
          FAIL() << "tree_sum is not one of kAllReduceOps";
      }
      ASSERT_EQ(f[i], want) << ReduceOpName(op) << " element " << i;
    }
  }
  std::vector<int64_t> ints(10, r);
  ASSERT_TRUE(comm->AllReduce(HostView(absl::MakeSpan(ints)), ReduceOp::kSum)
                  ->Wait()
                  .ok());
  for (int64_t v : ints) EXPECT_EQ(v, int64_t{n} * (n - 1) / 2);
  // MPI has no fixed-order sum: comm::OrderedAllReduce builds it instead.
  EXPECT_FALSE(comm->native_tree_sum());
  std::vector<float> g(4, 1.0f);
  EXPECT_EQ(comm->AllReduce(HostView(absl::MakeSpan(g)), ReduceOp::kTreeSum)
                ->Wait()
                .code(),
            absl::StatusCode::kUnimplemented);
}

TEST(MpiCommunicatorTest, HalfPrecisionReducesInF32AndRoundsOnce) {
  const int n = comm->size();
  // Each rank adds 1 + 2^-11 (not representable in f16, it rounds to 1):
  // reducing in f32 and rounding once gives round(n * (1 + 2^-11)).
  std::vector<uint16_t> h(16, half::F16FromF32(1.0f));
  ASSERT_TRUE(
      comm->AllReduce(HostView(h.data(), 16, DType::kF16), ReduceOp::kSum)
          ->Wait()
          .ok());
  for (uint16_t v : h) EXPECT_EQ(half::F32FromF16(v), static_cast<float>(n));
  std::vector<uint16_t> b(16, half::BF16FromF32(3.0f));
  ASSERT_TRUE(
      comm->AllReduce(HostView(b.data(), 16, DType::kBF16), ReduceOp::kAvg)
          ->Wait()
          .ok());
  for (uint16_t v : b) EXPECT_EQ(half::F32FromBF16(v), 3.0f);
}

TEST(MpiCommunicatorTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < comm->size(); ++root) {
    std::vector<double> d(257, comm->rank() == root ? root + 0.5 : -1);
    ASSERT_TRUE(
        comm->Broadcast(HostView(absl::MakeSpan(d)), root)->Wait().ok());
    for (double v : d) ASSERT_EQ(v, root + 0.5);
  }
}

TEST(MpiCommunicatorTest, AllGatherOutOfPlaceAndInPlace) {
  const int n = comm->size();
  const int r = comm->rank();
  std::vector<int32_t> send(3, r * 10);
  std::vector<int32_t> recv(3 * n, -1);
  ASSERT_TRUE(comm->AllGather(HostView(absl::MakeSpan(send)),
                              HostView(absl::MakeSpan(recv)))
                  ->Wait()
                  .ok());
  for (int k = 0; k < 3 * n; ++k) EXPECT_EQ(recv[k], (k / 3) * 10);
  std::vector<int32_t> in_place(3 * n, -1);
  for (int k = 0; k < 3; ++k) in_place[r * 3 + k] = r + 100;
  ASSERT_TRUE(comm->AllGather(HostView(in_place.data() + r * 3, 3, DType::kI32),
                              HostView(absl::MakeSpan(in_place)))
                  ->Wait()
                  .ok());
  for (int k = 0; k < 3 * n; ++k) EXPECT_EQ(in_place[k], k / 3 + 100);
}

TEST(MpiCommunicatorTest, ReduceScatterOutOfPlaceInPlaceAndHalf) {
  const int n = comm->size();
  const int r = comm->rank();
  std::vector<float> send(4 * n);
  for (int k = 0; k < 4 * n; ++k) send[k] = static_cast<float>(k + r);
  std::vector<float> recv(4, -1);
  ASSERT_TRUE(comm->ReduceScatter(HostView(absl::MakeSpan(send)),
                                  HostView(absl::MakeSpan(recv)),
                                  ReduceOp::kSum)
                  ->Wait()
                  .ok());
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(recv[k], static_cast<float>(n * (r * 4 + k) + n * (n - 1) / 2));
  }
  // In place: recv is this rank's slice of send.
  ASSERT_TRUE(comm->ReduceScatter(HostView(absl::MakeSpan(send)),
                                  HostView(send.data() + r * 4, 4, DType::kF32),
                                  ReduceOp::kMax)
                  ->Wait()
                  .ok());
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(send[r * 4 + k], static_cast<float>(r * 4 + k + n - 1));
  std::vector<uint16_t> hs(2 * n, half::BF16FromF32(2.0f));
  std::vector<uint16_t> hr(2, 0);
  ASSERT_TRUE(comm->ReduceScatter(HostView(hs.data(), 2 * n, DType::kBF16),
                                  HostView(hr.data(), 2, DType::kBF16),
                                  ReduceOp::kSum)
                  ->Wait()
                  .ok());
  for (uint16_t v : hr) EXPECT_EQ(half::F32FromBF16(v), 2.0f * n);
}

TEST(MpiCommunicatorTest, SendRecvAroundTheRing) {
  const int n = comm->size();
  if (n == 1) GTEST_SKIP() << "needs a peer";
  const int r = comm->rank();
  std::vector<int64_t> out(100, r), in(100, -1);
  auto recv = comm->Recv(HostView(absl::MakeSpan(in)), (r + n - 1) % n);
  auto send = comm->Send(HostView(absl::MakeSpan(out)), (r + 1) % n);
  ASSERT_TRUE(send->Wait().ok());
  ASSERT_TRUE(recv->Wait().ok());
  for (int64_t v : in) EXPECT_EQ(v, (r + n - 1) % n);
}

TEST(MpiCommunicatorTest, ManyOutstandingWaitedInReverse) {
  const int n = comm->size();
  std::vector<std::vector<float>> bufs(8, std::vector<float>(4096));
  std::vector<std::unique_ptr<Work>> works;
  for (int b = 0; b < 8; ++b) {
    std::fill(bufs[b].begin(), bufs[b].end(),
              static_cast<float>(b + comm->rank()));
    works.push_back(
        comm->AllReduce(HostView(absl::MakeSpan(bufs[b])), ReduceOp::kSum));
  }
  for (int b = 7; b >= 0; --b) ASSERT_TRUE(works[b]->Wait().ok());
  for (int b = 0; b < 8; ++b) {
    EXPECT_EQ(bufs[b][17], static_cast<float>(b * n + n * (n - 1) / 2));
  }
  EXPECT_TRUE(comm->Barrier().ok());
}

// Reads an OpenMPI control variable through MPI_T; -1 when it is missing.
int ReadIntCvar(const char* name) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return -1;
  int value = -1;
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) ==
        MPI_SUCCESS) {
      if (count == 1) MPI_T_cvar_read(handle, &value);
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return value;
}

TEST(MpiCommunicatorTest, NonblockingAllReduceUsesRing) {
  // MpiOptions::ring_iallreduce (on by default) selects libnbc's ring unless
  // the user set the MCA variable; mpirun_test.sh does not.
  ASSERT_EQ(std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm"), nullptr);
  EXPECT_EQ(ReadIntCvar("coll_libnbc_iallreduce_algorithm"), 1);
}

TEST(MpiCommunicatorTest, ArgumentErrorsComeBackAsFailedWork) {
  std::vector<float> x(4);
  auto bad_root = comm->Broadcast(HostView(absl::MakeSpan(x)), comm->size());
  EXPECT_TRUE(bad_root->IsCompleted());
  EXPECT_EQ(bad_root->Wait().code(), absl::StatusCode::kInvalidArgument);
  auto to_self = comm->Send(HostView(absl::MakeSpan(x)), comm->rank());
  EXPECT_EQ(to_self->Wait().code(), absl::StatusCode::kInvalidArgument);
  std::vector<int64_t> ints(4);
  auto avg_int =
      comm->AllReduce(HostView(absl::MakeSpan(ints)), ReduceOp::kAvg);
  EXPECT_EQ(avg_int->Wait().code(), absl::StatusCode::kInvalidArgument);
  BufferView device{x.data(), 4, DType::kF32, MemorySpace::kCuda, 0};
  auto on_device = comm->AllReduce(device, ReduceOp::kSum);
  EXPECT_THAT(on_device->Wait().message(), HasSubstr("mpi"));
  // The communicator is still usable after argument errors.
  EXPECT_TRUE(comm->Barrier().ok());
}

}  // namespace
}  // namespace tandem::comm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tandem::comm::MpiEnvironment);
  // Only rank 0's gtest output would be readable; all ranks still assert.
  return RUN_ALL_TESTS();
}
