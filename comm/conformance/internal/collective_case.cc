#include "comm/conformance/internal/collective_case.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/conformance/patterns.h"
#include "comm/types.h"
#include "comm/work.h"
#include "gtest/gtest.h"

namespace tandem::comm::conformance {

BufferView View(Bytes& bytes, DType dtype, int64_t offset, int64_t count) {
  return HostView(bytes.data() + offset * DTypeSize(dtype), count, dtype);
}

Bytes Filled(Pattern pattern, DType dtype, int rank, int buffer,
             int64_t count) {
  Bytes b(count * DTypeSize(dtype));
  FillPattern(pattern, dtype, rank, buffer, b.data(), count);
  return b;
}

Expected ComputeExpected(const CollectiveCase& c) {
  Expected e;
  const int n = c.world_size;
  for (int k = 0; k < c.outstanding; ++k) {
    switch (c.op) {
      case OpKind::kAllReduce:
        e.per_buffer.push_back(ReferenceReduce(PatternFor(c.reduce_op), c.dtype,
                                               c.reduce_op, n, k, c.count));
        break;
      case OpKind::kReduceScatter:
        e.per_buffer.push_back(ReferenceReduce(PatternFor(c.reduce_op), c.dtype,
                                               c.reduce_op, n, k, n * c.count));
        break;
      case OpKind::kAllGather: {
        Bytes all;
        for (int r = 0; r < n; ++r) {
          Bytes part = Filled(Pattern::kCopy, c.dtype, r, k, c.count);
          all.insert(all.end(), part.begin(), part.end());
        }
        e.per_buffer.push_back(std::move(all));
        break;
      }
      case OpKind::kBroadcast:
        e.per_buffer.push_back(
            Filled(Pattern::kCopy, c.dtype, c.root, k, c.count));
        break;
      default:
        break;  // Send/Recv expectations are per rank; Barrier has none.
    }
  }
  return e;
}

namespace {

// Waits for every Work in a rank-dependent order (so ranks wait in different
// orders from one another), checking IsCompleted() before and after.
absl::Status WaitAll(std::vector<std::unique_ptr<Work>>& works, int rank,
                     absl::string_view what) {
  const int k = static_cast<int>(works.size());
  for (auto& w : works) (void)w->IsCompleted();  // may make progress
  std::vector<int> order;
  switch (rank % 3) {
    case 0:
      for (int i = k - 1; i >= 0; --i) order.push_back(i);
      break;
    case 1:
      for (int i = 0; i < k; ++i) order.push_back(i);
      break;
    default:
      for (int i = 1; i < k; i += 2) order.push_back(i);
      for (int i = 0; i < k; i += 2) order.push_back(i);
      break;
  }
  for (int i : order) {
    absl::Status s = works[i]->Wait();
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat(what, " #", i, ": ", s.message()));
    }
    if (!works[i]->IsCompleted()) {
      return absl::InternalError(absl::StrCat(
          what, " #", i, ": Wait() returned OK but IsCompleted() is false"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckUnchanged(const Bytes& before, const Bytes& after,
                            DType dtype, absl::string_view what) {
  return CompareBuffers(absl::StrCat(what, " (an input) was modified"), dtype,
                        after.data(), before.data(),
                        static_cast<int64_t>(before.size()) / DTypeSize(dtype));
}

// One rank's buffers for one case, per operation k: `send[k]` what it reads
// when that is a buffer of its own (empty otherwise: in place, or an op with
// one buffer), `recv[k]` what it writes (in place: the one buffer).
struct RankBuffers {
  std::vector<Bytes> send;
  std::vector<Bytes> recv;
};

// What rank `rank` contributes to operation k: the send buffer's contents.
Bytes InputOf(const CollectiveCase& c, int rank, int k) {
  switch (c.op) {
    case OpKind::kAllReduce:
      return Filled(PatternFor(c.reduce_op), c.dtype, rank, k, c.count);
    case OpKind::kReduceScatter:
      return Filled(PatternFor(c.reduce_op), c.dtype, rank, k,
                    c.world_size * c.count);
    default:
      return Filled(Pattern::kCopy, c.dtype, rank, k, c.count);
  }
}

// Step 1: every buffer this rank issues, filled with its input or sentinels.
RankBuffers MakeBuffers(const CollectiveCase& c, int rank) {
  const int64_t elem = DTypeSize(c.dtype);
  const int64_t count = c.count;
  const int n = c.world_size;
  RankBuffers b;
  for (int k = 0; k < c.outstanding; ++k) {
    switch (c.op) {
      case OpKind::kAllReduce:
        b.recv.push_back(InputOf(c, rank, k));
        break;
      case OpKind::kBroadcast:
        b.recv.push_back(rank == c.root ? InputOf(c, rank, k)
                                        : Bytes(count * elem, kSentinel));
        break;
      case OpKind::kReduceScatter:
        if (c.in_place) {
          b.recv.push_back(InputOf(c, rank, k));
        } else {
          b.send.push_back(InputOf(c, rank, k));
          b.recv.emplace_back(count * elem, kSentinel);
        }
        break;
      case OpKind::kAllGather: {
        b.recv.emplace_back(n * count * elem, kSentinel);
        Bytes mine = InputOf(c, rank, k);
        if (!c.in_place) {
          b.send.push_back(std::move(mine));
        } else if (!mine.empty()) {
          std::memcpy(b.recv[k].data() + rank * count * elem, mine.data(),
                      mine.size());
        }
        break;
      }
      case OpKind::kSend:
      case OpKind::kRecv:
        b.send.push_back(InputOf(c, rank, k));
        b.recv.emplace_back(count * elem, kSentinel);
        break;
      case OpKind::kBarrier:
        break;
    }
  }
  return b;
}

// Step 2: issues every operation of the case, all outstanding at once.
// Send/Recv form a ring: even ranks post their Send first, odd ranks their
// Recv first.
std::vector<std::unique_ptr<Work>> Issue(const CollectiveCase& c, int rank,
                                         Communicator& comm, RankBuffers& b) {
  const DType dt = c.dtype;
  const int64_t count = c.count;
  const int n = c.world_size;
  std::vector<std::unique_ptr<Work>> works;
  for (int k = 0; k < c.outstanding; ++k) {
    switch (c.op) {
      case OpKind::kAllReduce:
        works.push_back(
            comm.AllReduce(View(b.recv[k], dt, 0, count), c.reduce_op));
        break;
      case OpKind::kBroadcast:
        works.push_back(comm.Broadcast(View(b.recv[k], dt, 0, count), c.root));
        break;
      case OpKind::kReduceScatter: {
        Bytes& in = c.in_place ? b.recv[k] : b.send[k];
        BufferView out = c.in_place ? View(in, dt, rank * count, count)
                                    : View(b.recv[k], dt, 0, count);
        works.push_back(
            comm.ReduceScatter(View(in, dt, 0, n * count), out, c.reduce_op));
        break;
      }
      case OpKind::kAllGather: {
        BufferView in = c.in_place ? View(b.recv[k], dt, rank * count, count)
                                   : View(b.send[k], dt, 0, count);
        works.push_back(comm.AllGather(in, View(b.recv[k], dt, 0, n * count)));
        break;
      }
      case OpKind::kSend:
      case OpKind::kRecv: {
        const int next = (rank + 1) % n;
        const int prev = (rank + n - 1) % n;
        auto send = [&] {
          works.push_back(comm.Send(View(b.send[k], dt, 0, count), next));
        };
        auto recv = [&] {
          works.push_back(comm.Recv(View(b.recv[k], dt, 0, count), prev));
        };
        if (rank % 2 == 0) {
          send();
          recv();
        } else {
          recv();
          send();
        }
        break;
      }
      case OpKind::kBarrier:
        break;
    }
  }
  return works;
}

// Step 4: every output holds the reference result and every separate input
// is unchanged.
absl::Status CheckResults(const CollectiveCase& c, const Expected& e, int rank,
                          const RankBuffers& b, absl::string_view what) {
  const DType dt = c.dtype;
  const int64_t elem = DTypeSize(dt);
  const int64_t count = c.count;
  const int n = c.world_size;
  for (int k = 0; k < c.outstanding; ++k) {
    std::string label = absl::StrCat(what, " buffer ", k);
    const uint8_t* got = b.recv[k].data();
    const uint8_t* want = nullptr;
    Bytes message;
    int64_t got_count = count;
    switch (c.op) {
      case OpKind::kAllReduce:
      case OpKind::kBroadcast:
        want = e.per_buffer[k].data();
        break;
      case OpKind::kReduceScatter:
        if (c.in_place) got += rank * count * elem;
        want = e.per_buffer[k].data() + rank * count * elem;
        break;
      case OpKind::kAllGather:
        want = e.per_buffer[k].data();
        got_count = n * count;
        break;
      case OpKind::kSend:
      case OpKind::kRecv: {
        const int prev = (rank + n - 1) % n;
        label = absl::StrCat(what, " message ", k, " from rank ", prev);
        message = InputOf(c, prev, k);
        want = message.data();
        break;
      }
      case OpKind::kBarrier:
        return absl::OkStatus();
    }
    TANDEM_RETURN_IF_ERROR(CompareBuffers(label, dt, got, want, got_count));
    if (!b.send.empty()) {
      TANDEM_RETURN_IF_ERROR(CheckUnchanged(InputOf(c, rank, k), b.send[k], dt,
                                            absl::StrCat(what, " send ", k)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// One rank's part of a case: make its buffers, issue every operation, wait
// for them in a rank-dependent order, check the results.
absl::Status RunCollectiveCase(const CollectiveCase& c, const Expected& e,
                               int rank, Communicator& comm) {
  if (comm.size() != c.world_size || comm.rank() != rank) {
    return absl::InternalError(absl::StrCat(
        "launcher gave rank ", rank, " of ", c.world_size,
        " a communicator with rank ", comm.rank(), " of ", comm.size()));
  }
  if (c.op == OpKind::kBarrier) {
    for (int k = 0; k < c.outstanding; ++k) {
      TANDEM_RETURN_IF_ERROR(comm.Barrier());
    }
    return absl::OkStatus();
  }
  const std::string what = absl::StrCat("rank ", rank, " ", OpKindName(c.op));
  RankBuffers buffers = MakeBuffers(c, rank);
  std::vector<std::unique_ptr<Work>> works = Issue(c, rank, comm, buffers);
  TANDEM_RETURN_IF_ERROR(WaitAll(works, rank, what));  // step 3
  return CheckResults(c, e, rank, buffers, what);
}

void ExpectAllOk(const std::vector<RankStatus>& statuses, int world_size,
                 const Launcher& launcher) {
  EXPECT_FALSE(statuses.empty()) << launcher.name() << " ran no rank";
  for (const RankStatus& rs : statuses) {
    EXPECT_TRUE(rs.status.ok()) << launcher.name() << " rank " << rs.rank
                                << " of " << world_size << ": " << rs.status;
  }
}

std::string TestName() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return absl::StrCat(info->test_suite_name(), ".", info->name());
}

}  // namespace tandem::comm::conformance
