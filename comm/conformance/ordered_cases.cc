// OrderedSumConformanceTest: comm/ordered's collectives on this engine give
// the canonical tree over rank order bit for bit (OrderedAllReduce in
// place at several counts through one workspace, OrderedReduceScatter in
// and out of place, each with a staging buffer of its own), on
// terms whose sum changes with its association, so an engine path that
// reassociated (a ring, left to right) would fail the comparison.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/conformance/conformance.h"
#include "comm/conformance/internal/collective_case.h"
#include "comm/conformance/watchdog.h"
#include "comm/ordered/order_sensitive_terms.h"
#include "comm/ordered/ordered_sum.h"
#include "comm/types.h"
#include "gtest/gtest.h"

namespace tandem::comm::conformance {
namespace {

// The canonical tree over every rank's terms, computed on one host.
template <typename T>
absl::StatusOr<std::vector<T>> Expected(int world, int64_t count) {
  std::vector<std::vector<T>> all;
  std::vector<const void*> leaves;
  for (int r = 0; r < world; ++r)
    all.push_back(OrderSensitiveTerms<T>(r, count));
  for (const auto& v : all) leaves.push_back(v.data());
  std::vector<T> out(count);
  TANDEM_RETURN_IF_ERROR(
      CanonicalTreeSum(DTypeOf<T>(), count, leaves, out.data()));
  return out;
}

template <typename T>
absl::Status Check(const std::vector<T>& got, const std::vector<T>& want,
                   const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return absl::InternalError(absl::StrCat(what, ": element ", i, " is ",
                                              got[i], ", expected ", want[i]));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status RankPart(Communicator& comm) {
  const int world = comm.size();
  const int rank = comm.rank();
  OrderedSumWorkspace workspace;  // reused as the counts grow
  for (int64_t count : {0, 1, 5, 1000, 3 * 1024 + 7}) {
    TANDEM_ASSIGN_OR_RETURN(std::vector<T> want, Expected<T>(world, count));
    std::vector<T> buf = OrderSensitiveTerms<T>(rank, count);
    TANDEM_RETURN_IF_ERROR(
        OrderedAllReduce(comm, HostView(absl::MakeSpan(buf)), &workspace));
    TANDEM_RETURN_IF_ERROR(
        Check(buf, want, absl::StrCat("OrderedAllReduce count ", count)));
    // Reduce-scatter: segment s of each rank's send is its terms s * seg ...
    const int64_t seg = count;
    std::vector<T> send(static_cast<size_t>(world * seg));
    for (int s = 0; s < world; ++s) {
      for (int64_t i = 0; i < seg; ++i)
        send[s * seg + i] = OrderSensitiveTerm<T>(rank, i + s);
    }
    TANDEM_ASSIGN_OR_RETURN(std::vector<T> shifted,
                            Expected<T>(world, count + rank));
    std::vector<T> want_seg(shifted.begin() + rank, shifted.end());
    std::vector<T> recv(static_cast<size_t>(seg));
    TANDEM_RETURN_IF_ERROR(OrderedReduceScatter(
        comm, HostView(absl::MakeSpan(send)), HostView(absl::MakeSpan(recv))));
    TANDEM_RETURN_IF_ERROR(Check(
        recv, want_seg, absl::StrCat("OrderedReduceScatter count ", count)));
    // In place: recv is this rank's slice of send.
    BufferView all = HostView(absl::MakeSpan(send));
    BufferView mine = all;
    mine.data = send.data() + rank * seg;
    mine.count = seg;
    TANDEM_RETURN_IF_ERROR(OrderedReduceScatter(comm, all, mine));
    std::vector<T> in_place(send.begin() + rank * seg,
                            send.begin() + (rank + 1) * seg);
    TANDEM_RETURN_IF_ERROR(
        Check(in_place, want_seg,
              absl::StrCat("OrderedReduceScatter in place count ", count)));
  }
  return absl::OkStatus();
}

// The terms are chosen so that the canonical tree and a left-to-right sum
// differ from three ranks on: the comparison can catch a wrong order.
TEST(OrderedSumTerms, TellTheTreeFromLeftToRight) {
  for (int world : {3, 4, 8}) {
    absl::StatusOr<std::vector<float>> tree = Expected<float>(world, 64);
    ASSERT_TRUE(tree.ok());
    std::vector<float> serial(64, 0.0f);
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < 64; ++i)
        serial[i] += OrderSensitiveTerm<float>(r, i);
    }
    EXPECT_NE(*tree, serial) << world;
  }
}

}  // namespace

TEST_P(OrderedSumConformanceTest, CanonicalTreeOverRanksBitForBit) {
  const WorldCase& c = GetParam();
  if (!c.launcher->CanRun(c.world_size).ok()) GTEST_SKIP();
  Watchdog watchdog(DefaultWatchdogLimit(), TestName());
  ExpectAllOk(c.launcher->Run(c.world_size,
                              [](int, Communicator& comm) -> absl::Status {
                                TANDEM_RETURN_IF_ERROR(RankPart<float>(comm));
                                return RankPart<double>(comm);
                              }),
              c.world_size, *c.launcher);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OrderedSumConformanceTest);

}  // namespace tandem::comm::conformance
