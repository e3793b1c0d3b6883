// NcclCommunicator and RunOnLocalGpus. Three groups:
//   * NoGpu*: run on every machine; without a GPU (or without CUDA) they
//     check that every entry point fails at once with a clear error, never
//     a crash or a hang; with GPUs they skip.
//   * Args*: argument checks that need no device.
//   * OneGpu*/MultiGpu*: exact values on real devices; skip when the
//     machine has fewer GPUs than they need.
#include "comm/nccl/nccl_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/half.h"
#include "comm/nccl/cuda_probe.h"
#include "comm/nccl/device_buffer.h"
#include "comm/nccl/local_gpus.h"
#include "comm/types.h"
#include "comm/work.h"
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

bool BuiltWithCuda() {
  absl::StatusOr<CudaProbe> probe = ProbeCuda();
  return probe.ok() && probe->built_with_cuda;
}

#define SKIP_UNLESS_GPUS(n)                                           \
  do {                                                                \
    if (LocalGpuCount() < (n)) {                                      \
      GTEST_SKIP() << "needs " << (n) << " GPU(s); this machine has " \
                   << LocalGpuCount();                                \
    }                                                                 \
  } while (false)

// A device copy of `host` on `comm`'s device.
template <typename T>
absl::StatusOr<DeviceBuffer> ToDevice(const NcclCommunicator& comm,
                                      const std::vector<T>& host) {
  absl::StatusOr<DeviceBuffer> dev = DeviceBuffer::Allocate(
      comm.device().ordinal, static_cast<int64_t>(host.size() * sizeof(T)));
  if (!dev.ok()) return dev.status();
  absl::Status s = dev->CopyFromHost(host.data(), dev->bytes());
  if (!s.ok()) return s;
  return dev;
}

template <typename T>
absl::StatusOr<std::vector<T>> ToHost(const DeviceBuffer& dev) {
  std::vector<T> host(static_cast<size_t>(dev.bytes()) / sizeof(T));
  absl::Status s = dev.CopyToHost(host.data(), dev.bytes());
  if (!s.ok()) return s;
  return host;
}

// Returns from a rank function with a message unless `cond`.
#define RANK_CHECK(cond, ...)                                           \
  do {                                                                  \
    if (!(cond)) {                                                      \
      return absl::InternalError(                                       \
          absl::StrCat("rank ", rank, ": ", #cond, ": ", __VA_ARGS__)); \
    }                                                                   \
  } while (false)

#define RANK_ASSIGN(lhs, expr)                  \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

// ------------------------------------------------------------- No GPU ---

TEST(NoGpuTest, RunOnLocalGpusFailsAtOnceWithTheReason) {
  if (LocalGpuCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  std::atomic<int> calls{0};
  // Refused before any rank starts: the FailedPrecondition below (not a
  // timeout) is the proof that nothing waited, so no time is measured.
  LocalRunResult result =
      RunOnLocalGpus(2, [&](int, NcclCommunicator&) -> absl::Status {
        ++calls;
        return absl::OkStatus();
      });
  EXPECT_EQ(calls.load(), 0);
  EXPECT_TRUE(result.ranks.empty());
  EXPECT_EQ(result.launch.code(), absl::StatusCode::kFailedPrecondition)
      << result.launch;
  EXPECT_THAT(result.launch.message(), HasSubstr("no GPU to run on"));
  EXPECT_THAT(result.launch.message(), HasSubstr("sim backend"));
  if (!BuiltWithCuda()) {
    EXPECT_THAT(result.launch.message(), HasSubstr("built without CUDA"));
    EXPECT_THAT(result.launch.message(),
                HasSubstr("install a CUDA toolkit with NCCL and rebuild"));
  }
  EXPECT_EQ(result.status(), result.launch);
}

TEST(NoGpuTest, CreateFailsWithFailedPrecondition) {
  if (LocalGpuCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  NcclUniqueId id{};
  absl::StatusOr<std::unique_ptr<NcclCommunicator>> comm =
      NcclCommunicator::Create(id, /*rank=*/0, /*size=*/1, /*device=*/0);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kFailedPrecondition)
      << comm.status();
  EXPECT_THAT(comm.status().message(),
              HasSubstr("NcclCommunicator::Create(rank 0 of 1, device 0)"));
  EXPECT_THAT(comm.status().message(),
              HasSubstr(BuiltWithCuda() ? "no usable CUDA device"
                                        : "built without CUDA"));
}

TEST(NoGpuTest, DeviceBufferCannotBeAllocated) {
  if (LocalGpuCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  absl::StatusOr<DeviceBuffer> buf = DeviceBuffer::Allocate(0, 1024);
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), absl::StatusCode::kFailedPrecondition)
      << buf.status();
}

TEST(NoGpuTest, LocalGpuWorldCreateFails) {
  if (LocalGpuCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  auto world = LocalGpuWorld::Create(1);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(NoGpuTest, NewUniqueIdFailsCleanlyWithoutCuda) {
  if (BuiltWithCuda()) {
    // With the library but maybe no device: must return, either way.
    absl::StatusOr<NcclUniqueId> id = NcclCommunicator::NewUniqueId();
    if (id.ok()) {
      bool all_zero = true;
      for (uint8_t b : *id) all_zero = all_zero && b == 0;
      EXPECT_FALSE(all_zero) << "ncclGetUniqueId returned an all-zero id";
    } else {
      EXPECT_THAT(id.status().message(), HasSubstr("ncclGetUniqueId"));
    }
    return;
  }
  absl::StatusOr<NcclUniqueId> id = NcclCommunicator::NewUniqueId();
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("built without CUDA"));
}

// ---------------------------------------------------- Argument checks ---

TEST(ArgsTest, CreateRejectsRankOutsideTheWorld) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "built without CUDA";
  NcclUniqueId id{};
  auto comm = NcclCommunicator::Create(id, /*rank=*/2, /*size=*/2, 0);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(comm.status().message(),
              HasSubstr("rank must be in [0, 2); found 2"));
  auto zero =
      NcclCommunicator::Create(id, 0, 1, 0, WithTimeout(absl::ZeroDuration()));
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("timeout must be positive"));
}

TEST(ArgsTest, WorldSizeMustBePositive) {
  auto world = LocalGpuWorld::Create(0);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(world.status().message(),
              HasSubstr("world size must be at least 1"));
}

TEST(ArgsTest, StreamWaitForACompletedWorkReturnsItsStatus) {
  std::unique_ptr<Work> failed =
      MakeCompletedWork(absl::InvalidArgumentError("bad buffer"));
  absl::Status s = StreamWaitForWork(*failed, CudaStreamHandle{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad buffer");
  EXPECT_TRUE(StreamWaitForWork(*MakeCompletedWork(), CudaStreamHandle{}).ok());
}

TEST(LocalRunResultTest, StatusPrefersTheCauseOverAborts) {
  LocalRunResult r;
  r.ranks = {absl::AbortedError("rank 1 failed: x"),
             absl::UnavailableError("x"), absl::OkStatus()};
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("rank 1: x"));
  r.ranks = {absl::OkStatus(), absl::AbortedError("y")};
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(r.status().message(), HasSubstr("rank 1: y"));
  r.ranks = {absl::OkStatus()};
  EXPECT_TRUE(r.ok());
}

// ------------------------------------------------------------ One GPU ---

TEST(OneGpuTest, EveryOperationOnWorldSizeOne) {
  SKIP_UNLESS_GPUS(1);
  LocalRunResult result =
      RunOnLocalGpus(1, [](int rank, NcclCommunicator& comm) -> absl::Status {
        RANK_CHECK(comm.backend() == "nccl", "backend");
        RANK_CHECK(comm.device() == CommDevice::Cuda(0), comm.device().ordinal);
        std::vector<float> x(1000);
        for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>(i % 13) - 6;
        for (ReduceOp op : kAllReduceOps) {
          RANK_ASSIGN(dev, ToDevice(comm, x));
          absl::Status s =
              comm.AllReduce(dev.View(DType::kF32, 0, 1000), op)->Wait();
          RANK_CHECK(s.ok(), s.ToString());
          RANK_ASSIGN(back, ToHost<float>(dev));
          RANK_CHECK(back == x, "AllReduce ", ReduceOpName(op),
                     " of one rank must be the identity");
        }
        // AllGather and ReduceScatter of one rank copy.
        RANK_ASSIGN(src, ToDevice(comm, x));
        RANK_ASSIGN(dst, ToDevice(comm, std::vector<float>(1000, -99.0f)));
        absl::Status s = comm.AllGather(src.View(DType::kF32, 0, 1000),
                                        dst.View(DType::kF32, 0, 1000))
                             ->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        RANK_ASSIGN(gathered, ToHost<float>(dst));
        RANK_CHECK(gathered == x, "AllGather copy");
        RANK_CHECK(comm.Barrier().ok(), "Barrier");
        return comm.Synchronize();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

TEST(OneGpuTest, WrongMemoryIsAnArgumentErrorAndTheCommunicatorStaysUsable) {
  SKIP_UNLESS_GPUS(1);
  LocalRunResult result =
      RunOnLocalGpus(1, [](int rank, NcclCommunicator& comm) -> absl::Status {
        std::vector<float> host(8, 1.0f);
        // A host view: the shared memory-space message.
        std::unique_ptr<Work> w =
            comm.AllReduce(HostView(absl::MakeSpan(host)), ReduceOp::kSum);
        RANK_CHECK(w->IsCompleted(), "argument errors complete at once");
        absl::Status s = w->Wait();
        RANK_CHECK(s.code() == absl::StatusCode::kInvalidArgument,
                   s.ToString());
        RANK_CHECK(absl::StrContains(s.message(),
                                     "the nccl backend moves cuda memory only"),
                   s.ToString());
        // A view that claims another device.
        RANK_ASSIGN(dev, ToDevice(comm, host));
        BufferView elsewhere = dev.View(DType::kF32, 0, 8);
        elsewhere.device = 7;
        s = comm.AllReduce(elsewhere, ReduceOp::kSum)->Wait();
        RANK_CHECK(absl::StrContains(
                       s.message(),
                       "is on cuda:7 but this NCCL communicator drives cuda:0"),
                   s.ToString());
        // Host memory labelled as device memory: caught by the pointer check.
        BufferView liar{host.data(), 8, DType::kF32, MemorySpace::kCuda, 0};
        s = comm.Broadcast(liar, 0)->Wait();
        RANK_CHECK(absl::StrContains(s.message(), "points to host memory"),
                   s.ToString());
        // Nothing was issued: collective #0 is still the next one.
        s = comm.AllReduce(dev.View(DType::kF32, 0, 8), ReduceOp::kSum)->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        return absl::OkStatus();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

// ---------------------------------------------------------- Multi GPU ---

int MultiGpuWorld() { return std::min(LocalGpuCount(), 4); }

TEST(MultiGpuTest, ExactValuesForEveryOperation) {
  SKIP_UNLESS_GPUS(2);
  const int n = MultiGpuWorld();
  LocalRunResult result =
      RunOnLocalGpus(n, [n](int rank, NcclCommunicator& comm) -> absl::Status {
        constexpr int kCount = 1000;
        std::vector<float> x(kCount);
        for (int i = 0; i < kCount; ++i) {
          x[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
        }
        // Sum, Avg (Sum / n, rounded once), Max.
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          RANK_ASSIGN(dev, ToDevice(comm, x));
          absl::Status s =
              comm.AllReduce(dev.View(DType::kF32, 0, kCount), op)->Wait();
          RANK_CHECK(s.ok(), s.ToString());
          RANK_ASSIGN(got, ToHost<float>(dev));
          for (int i = 0; i < kCount; ++i) {
            const float base = static_cast<float>(i % 7 + 1);
            const float sum = base * static_cast<float>(n * (n + 1) / 2);
            const float want = op == ReduceOp::kSum ? sum
                               : op == ReduceOp::kAvg
                                   ? sum / static_cast<float>(n)
                                   : base * static_cast<float>(n);
            RANK_CHECK(got[i] == want, ReduceOpName(op), " [", i,
                       "] = ", got[i], ", want ", want);
          }
        }
        // bf16 sum: small integers are exact in 16 bits.
        std::vector<uint16_t> h(64);
        for (int i = 0; i < 64; ++i)
          h[i] = half::BF16FromF32(static_cast<float>(rank - i % 3));
        RANK_ASSIGN(hdev, ToDevice(comm, h));
        absl::Status s =
            comm.AllReduce(hdev.View(DType::kBF16, 0, 64), ReduceOp::kSum)
                ->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        RANK_ASSIGN(hgot, ToHost<uint16_t>(hdev));
        for (int i = 0; i < 64; ++i) {
          const float want = static_cast<float>(n * (n - 1) / 2 - n * (i % 3));
          RANK_CHECK(half::F32FromBF16(hgot[i]) == want, "bf16 [", i, "]");
        }
        // Broadcast from the last rank.
        std::vector<int64_t> b(33, rank == n - 1 ? 4242 : -1);
        RANK_ASSIGN(bdev, ToDevice(comm, b));
        s = comm.Broadcast(bdev.View(DType::kI64, 0, 33), n - 1)->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        RANK_ASSIGN(bgot, ToHost<int64_t>(bdev));
        RANK_CHECK(bgot == std::vector<int64_t>(33, 4242), "broadcast");
        // In-place AllGather: each rank's slice already in place.
        std::vector<int32_t> g(5 * n, -1);
        for (int i = 0; i < 5; ++i) g[rank * 5 + i] = rank * 100 + i;
        RANK_ASSIGN(gdev, ToDevice(comm, g));
        s = comm.AllGather(gdev.View(DType::kI32, rank * 5, 5),
                           gdev.View(DType::kI32, 0, 5 * n))
                ->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        RANK_ASSIGN(ggot, ToHost<int32_t>(gdev));
        for (int r = 0; r < n; ++r) {
          for (int i = 0; i < 5; ++i) {
            RANK_CHECK(ggot[r * 5 + i] == r * 100 + i, "allgather ", r, ",", i);
          }
        }
        // ReduceScatter (Sum) out of place.
        std::vector<double> rs(3 * n);
        for (int i = 0; i < 3 * n; ++i) rs[i] = rank + 0.5 * i;
        RANK_ASSIGN(rsdev, ToDevice(comm, rs));
        RANK_ASSIGN(rsout, ToDevice(comm, std::vector<double>(3, -1.0)));
        s = comm.ReduceScatter(rsdev.View(DType::kF64, 0, 3 * n),
                               rsout.View(DType::kF64, 0, 3), ReduceOp::kSum)
                ->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        RANK_ASSIGN(rsgot, ToHost<double>(rsout));
        for (int i = 0; i < 3; ++i) {
          const double want = n * (n - 1) / 2.0 + n * 0.5 * (rank * 3 + i);
          RANK_CHECK(rsgot[i] == want, "reduce-scatter [", i, "]");
        }
        // A ring where every rank sends before it receives: the queued
        // Send/Recv go out as one NCCL group, so this does not deadlock.
        std::vector<uint8_t> out(100, static_cast<uint8_t>(rank + 1));
        RANK_ASSIGN(sdev, ToDevice(comm, out));
        RANK_ASSIGN(rdev, ToDevice(comm, std::vector<uint8_t>(100, 0)));
        std::unique_ptr<Work> sw =
            comm.Send(sdev.View(DType::kU8, 0, 100), (rank + 1) % n);
        std::unique_ptr<Work> rw =
            comm.Recv(rdev.View(DType::kU8, 0, 100), (rank + n - 1) % n);
        s = rw->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        s = sw->Wait();
        RANK_CHECK(s.ok(), s.ToString());
        RANK_ASSIGN(rgot, ToHost<uint8_t>(rdev));
        RANK_CHECK(
            rgot == std::vector<uint8_t>(
                        100, static_cast<uint8_t>((rank + n - 1) % n + 1)),
            "ring message");
        return comm.Barrier();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

TEST(MultiGpuTest, TimeoutAbortsAndNamesTheOperationAndSequenceNumber) {
  SKIP_UNLESS_GPUS(2);
  absl::Status timed_out, after;
  LocalRunResult result = RunOnLocalGpus(
      2,
      [&](int rank, NcclCommunicator& comm) -> absl::Status {
        RANK_ASSIGN(dev, ToDevice(comm, std::vector<float>(16, 1.0f)));
        const BufferView v = dev.View(DType::kF32, 0, 16);
        absl::Status s = comm.AllReduce(v, ReduceOp::kSum)->Wait();  // #0
        RANK_CHECK(s.ok(), s.ToString());
        if (rank == 1) return absl::OkStatus();  // never issues #1
        timed_out = comm.AllReduce(v, ReduceOp::kSum)->Wait();  // #1
        after = comm.AllReduce(v, ReduceOp::kSum)->Wait();      // fails fast
        return absl::OkStatus();
      },
      WithTimeout(absl::Seconds(3)));
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_THAT(timed_out.message(),
              HasSubstr("NCCL AllReduce #1 (f32[16] cuda:0, sum) on rank 0"));
  EXPECT_THAT(timed_out.message(), HasSubstr("did not complete within 3s"));
  EXPECT_THAT(timed_out.message(), HasSubstr("ncclCommAbort"));
  EXPECT_EQ(after.code(), absl::StatusCode::kAborted) << after;
  EXPECT_THAT(after.message(), HasSubstr("aborted earlier"));
  EXPECT_TRUE(result.ranks.size() == 2 && !result.ranks[0].ok());
}

TEST(MultiGpuTest, AFailingRankAbortsThePeersThatWaitForIt) {
  SKIP_UNLESS_GPUS(2);
  absl::Status waited;
  LocalRunResult result = RunOnLocalGpus(
      2,
      [&](int rank, NcclCommunicator& comm) -> absl::Status {
        if (rank == 1) return absl::DataLossError("rank 1 lost its data");
        RANK_ASSIGN(dev, ToDevice(comm, std::vector<float>(16, 1.0f)));
        waited = comm.AllReduce(dev.View(DType::kF32, 0, 16), ReduceOp::kSum)
                     ->Wait();
        return waited;
      },
      WithTimeout(absl::Minutes(10)));
  // Ended by the signal (Aborted naming rank 1), not by the 10-minute
  // timeout (DeadlineExceeded): the code is the proof, not a clock.
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_THAT(waited.message(), HasSubstr("rank 1 failed"));
  EXPECT_THAT(waited.message(), HasSubstr("rank 1 lost its data"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss)
      << result.status();
}

TEST(MultiGpuTest, WorldSizeAboveTheVisibleGpusIsRefused) {
  SKIP_UNLESS_GPUS(1);
  LocalRunResult result = RunOnLocalGpus(
      LocalGpuCount() + 1,
      [](int, NcclCommunicator&) -> absl::Status { return absl::OkStatus(); });
  EXPECT_EQ(result.launch.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.launch.message(), HasSubstr("CUDA_VISIBLE_DEVICES"));
}

}  // namespace
}  // namespace tandem::comm
