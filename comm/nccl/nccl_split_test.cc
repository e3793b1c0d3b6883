// NcclCommunicator::Split (ncclCommSplit) on the local GPUs, through
// StagingCommunicator so the checks use host buffers. Needs GPUs (tagged
// "gpu"); each test skips when the machine has fewer than it needs. The
// full contract on children runs in conformance_test (the NcclSplit cases,
// 2 GPUs and more).
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/nccl/local_gpus.h"
#include "comm/nccl/nccl_communicator.h"
#include "comm/nccl/staging_communicator.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::comm {
namespace {

using ::testing::HasSubstr;

#define SKIP_UNLESS_GPUS(n)                                           \
  do {                                                                \
    if (LocalGpuCount() < (n)) {                                      \
      GTEST_SKIP() << "needs " << (n) << " GPU(s); this machine has " \
                   << LocalGpuCount();                                \
    }                                                                 \
  } while (false)

absl::Status Expect(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

absl::StatusOr<float> SumOf(Communicator& comm, float value) {
  std::vector<float> v = {value};
  TANDEM_RETURN_IF_ERROR(
      comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait());
  return v[0];
}

// One rank: a child of one, a nested child, kNoColor, and the parent still
// usable afterwards.
TEST(OneGpuSplitTest, ChildNestedChildAndNoColor) {
  SKIP_UNLESS_GPUS(1);
  LocalRunResult result =
      RunOnLocalGpus(1, [](int rank, NcclCommunicator& nccl) -> absl::Status {
        StagingCommunicator comm(nccl);
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                                comm.Split(3, 7));
        TANDEM_RETURN_IF_ERROR(Expect(
            sub != nullptr && sub->size() == 1 && sub->rank() == 0, "child"));
        TANDEM_RETURN_IF_ERROR(Expect(sub->backend() == "nccl", "backend"));
        TANDEM_ASSIGN_OR_RETURN(float s, SumOf(*sub, 5));
        TANDEM_RETURN_IF_ERROR(Expect(s == 5, "child sum"));
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> nested,
                                sub->Split(0, 0));
        TANDEM_ASSIGN_OR_RETURN(float n, SumOf(*nested, 2));
        TANDEM_RETURN_IF_ERROR(Expect(n == 2, "nested sum"));
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> none,
                                comm.Split(Communicator::kNoColor, 0));
        TANDEM_RETURN_IF_ERROR(Expect(none == nullptr, "kNoColor: nullptr"));
        nested.reset();
        sub.reset();
        TANDEM_ASSIGN_OR_RETURN(float p, SumOf(comm, 1));
        TANDEM_RETURN_IF_ERROR(Expect(p == 1, "parent sum"));
        (void)rank;
        return nccl.Synchronize();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

TEST(OneGpuSplitTest, ABadColorIsAnArgumentErrorAndTheParentStaysUsable) {
  SKIP_UNLESS_GPUS(1);
  LocalRunResult result =
      RunOnLocalGpus(1, [](int, NcclCommunicator& nccl) -> absl::Status {
        absl::StatusOr<std::unique_ptr<NcclCommunicator>> bad =
            nccl.SplitNccl(-4, 0);
        TANDEM_RETURN_IF_ERROR(
            Expect(bad.status().code() == absl::StatusCode::kInvalidArgument,
                   bad.status().ToString()));
        TANDEM_RETURN_IF_ERROR(Expect(
            absl::StrContains(bad.status().message(), "rank 0 passed color -4"),
            bad.status().ToString()));
        return nccl.Barrier();
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

// Two ranks: keys reverse the order, colors by rank give singletons, and
// kNoColor on one rank leaves the other a world of one.
TEST(MultiGpuSplitTest, OrderColorsAndNoColor) {
  SKIP_UNLESS_GPUS(2);
  LocalRunResult result =
      RunOnLocalGpus(2, [](int rank, NcclCommunicator& nccl) -> absl::Status {
        StagingCommunicator comm(nccl);
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> rev,
                                comm.Split(0, -rank));
        TANDEM_RETURN_IF_ERROR(
            Expect(rev->size() == 2 && rev->rank() == 1 - rank,
                   "key -rank reverses the order"));
        std::vector<float> msg = {static_cast<float>(10 + rank)};
        if (rev->rank() == 0) {
          TANDEM_RETURN_IF_ERROR(
              rev->Send(HostView(absl::MakeSpan(msg)), 1)->Wait());
        } else {
          TANDEM_RETURN_IF_ERROR(
              rev->Recv(HostView(absl::MakeSpan(msg)), 0)->Wait());
          TANDEM_RETURN_IF_ERROR(Expect(msg[0] == 11, "from parent rank 1"));
        }
        TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> alone,
                                comm.Split(rank, 0));
        TANDEM_ASSIGN_OR_RETURN(float s, SumOf(*alone, 1 + rank));
        TANDEM_RETURN_IF_ERROR(Expect(s == 1 + rank, "a world of one"));
        TANDEM_ASSIGN_OR_RETURN(
            std::unique_ptr<Communicator> some,
            comm.Split(rank == 1 ? Communicator::kNoColor : 0, 0));
        if (rank == 1) return Expect(some == nullptr, "kNoColor: nullptr");
        TANDEM_RETURN_IF_ERROR(Expect(some->size() == 1, "rank 0 alone"));
        TANDEM_ASSIGN_OR_RETURN(float p, SumOf(comm, 1));
        return Expect(p == 2, "the parent still sums both");
      });
  ASSERT_TRUE(result.ok()) << result.status();
}

}  // namespace
}  // namespace tandem::comm
