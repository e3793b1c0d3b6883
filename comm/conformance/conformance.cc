#include "comm/conformance/conformance.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "comm/conformance/internal/collective_case.h"
#include "comm/conformance/patterns.h"
#include "comm/conformance/watchdog.h"
#include "comm/launcher.h"
#include "comm/types.h"
#include "comm/work.h"
#include "gtest/gtest.h"

namespace tandem::comm::conformance {
namespace {

int64_t MaxBytes(const SuiteOptions& options) {
  const char* env = std::getenv("TANDEM_CONFORMANCE_MAX_BYTES");
  int64_t bytes = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &bytes) && bytes > 0) {
    return bytes;
  }
  return options.max_bytes;
}

std::vector<ReduceOp> ValidReduceOps(DType dtype) {
  std::vector<ReduceOp> ops;
  for (ReduceOp op : kAllReduceOps) {
    if (op == ReduceOp::kAvg && !IsFloatingPoint(dtype)) continue;
    ops.push_back(op);
  }
  return ops;
}

// ---------------------------------------------------- Mixed outstanding ---

struct MixedOp {
  OpKind op;
  DType dtype;
  ReduceOp reduce_op;
  int64_t count;
};

std::vector<MixedOp> MixedOps(int n) {
  std::vector<MixedOp> ops = {
      {OpKind::kAllReduce, DType::kF32, ReduceOp::kSum, 1000},
      {OpKind::kBroadcast, DType::kI64, ReduceOp::kSum, 333},
      {OpKind::kAllGather, DType::kBF16, ReduceOp::kSum, 77},
      {OpKind::kReduceScatter, DType::kI32, ReduceOp::kMax, 129},
      {OpKind::kAllReduce, DType::kF64, ReduceOp::kAvg, 70001},
      {OpKind::kAllReduce, DType::kU8, ReduceOp::kProd, 5},
  };
  if (n > 1) {
    ops.push_back({OpKind::kSend, DType::kF64, ReduceOp::kSum, 50});
    ops.push_back({OpKind::kRecv, DType::kF64, ReduceOp::kSum, 50});
  }
  return ops;
}

absl::Status RunMixed(int rank, Communicator& comm) {
  const int n = comm.size();
  const std::vector<MixedOp> ops = MixedOps(n);
  const int m = static_cast<int>(ops.size());
  std::vector<Bytes> a(m), b(m);
  std::vector<std::unique_ptr<Work>> works;
  for (int i = 0; i < m; ++i) {
    const MixedOp& op = ops[i];
    const DType dt = op.dtype;
    const int64_t es = DTypeSize(dt);
    switch (op.op) {
      case OpKind::kAllReduce:
        a[i] = Filled(PatternFor(op.reduce_op), dt, rank, i, op.count);
        works.push_back(
            comm.AllReduce(View(a[i], dt, 0, op.count), op.reduce_op));
        break;
      case OpKind::kBroadcast:
        a[i] = rank == n - 1 ? Filled(Pattern::kCopy, dt, rank, i, op.count)
                             : Bytes(op.count * es, kSentinel);
        works.push_back(comm.Broadcast(View(a[i], dt, 0, op.count), n - 1));
        break;
      case OpKind::kAllGather:
        a[i] = Filled(Pattern::kCopy, dt, rank, i, op.count);
        b[i] = Bytes(n * op.count * es, kSentinel);
        works.push_back(comm.AllGather(View(a[i], dt, 0, op.count),
                                       View(b[i], dt, 0, n * op.count)));
        break;
      case OpKind::kReduceScatter:
        a[i] = Filled(PatternFor(op.reduce_op), dt, rank, i, n * op.count);
        b[i] = Bytes(op.count * es, kSentinel);
        works.push_back(comm.ReduceScatter(View(a[i], dt, 0, n * op.count),
                                           View(b[i], dt, 0, op.count),
                                           op.reduce_op));
        break;
      case OpKind::kSend:
        a[i] = Filled(Pattern::kCopy, dt, rank, i, op.count);
        works.push_back(comm.Send(View(a[i], dt, 0, op.count), (rank + 1) % n));
        break;
      case OpKind::kRecv:
        a[i] = Bytes(op.count * es, kSentinel);
        works.push_back(
            comm.Recv(View(a[i], dt, 0, op.count), (rank + n - 1) % n));
        break;
      case OpKind::kBarrier:
        break;
    }
  }
  // Each rank starts waiting at a different operation.
  for (int j = 0; j < m; ++j) {
    const int i = (j + rank) % m;
    if (absl::Status s = works[i]->Wait(); !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("rank ", rank, " op ", i, " (",
                                 OpKindName(ops[i].op), "): ", s.message()));
    }
  }
  for (int i = 0; i < m; ++i) {
    const MixedOp& op = ops[i];
    const DType dt = op.dtype;
    const std::string what =
        absl::StrCat("rank ", rank, " op ", i, " (", OpKindName(op.op), ")");
    absl::Status s;
    switch (op.op) {
      case OpKind::kAllReduce: {
        Bytes want = ReferenceReduce(PatternFor(op.reduce_op), dt, op.reduce_op,
                                     n, i, op.count);
        s = CompareBuffers(what, dt, a[i].data(), want.data(), op.count);
        break;
      }
      case OpKind::kBroadcast: {
        Bytes want = Filled(Pattern::kCopy, dt, n - 1, i, op.count);
        s = CompareBuffers(what, dt, a[i].data(), want.data(), op.count);
        break;
      }
      case OpKind::kAllGather: {
        Bytes want;
        for (int r = 0; r < n; ++r) {
          Bytes part = Filled(Pattern::kCopy, dt, r, i, op.count);
          want.insert(want.end(), part.begin(), part.end());
        }
        s = CompareBuffers(what, dt, b[i].data(), want.data(), n * op.count);
        break;
      }
      case OpKind::kReduceScatter: {
        Bytes all = ReferenceReduce(PatternFor(op.reduce_op), dt, op.reduce_op,
                                    n, i, n * op.count);
        s = CompareBuffers(what, dt, b[i].data(),
                           all.data() + rank * op.count * DTypeSize(dt),
                           op.count);
        break;
      }
      case OpKind::kRecv: {
        // The matching Send was op i - 1 on the previous rank.
        Bytes want =
            Filled(Pattern::kCopy, dt, (rank + n - 1) % n, i - 1, op.count);
        s = CompareBuffers(what, dt, a[i].data(), want.data(), op.count);
        break;
      }
      default:
        break;
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------ Bad input ---

// `work` must be already failed with kInvalidArgument and a message holding
// every one of `needles`.
absl::Status ExpectRejected(absl::string_view call, std::unique_ptr<Work> work,
                            const std::vector<std::string>& needles) {
  if (!work->IsCompleted()) {
    // Do not leave it in flight: it would wait for peers that never come.
    return absl::InternalError(absl::StrCat(
        call,
        ": expected an already-failed Work (an argument error found at "
        "enqueue), found a Work still in flight"));
  }
  absl::Status s = work->Wait(absl::ZeroDuration());
  if (s.code() != absl::StatusCode::kInvalidArgument) {
    return absl::InternalError(absl::StrCat(
        call, ": expected kInvalidArgument, found ", s.ToString()));
  }
  for (const std::string& needle : needles) {
    if (!absl::StrContains(s.message(), needle)) {
      return absl::InternalError(absl::StrCat(
          call, ": the message \"", s.message(), "\" lacks \"", needle, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status RunBadInput(int rank, Communicator& comm) {
  const int n = comm.size();
  const std::string on = absl::StrCat(" on rank ", rank);
  std::vector<float> f(4 * n + 8, 1.0f);
  std::vector<double> d(4 * n + 8, 1.0);
  std::vector<int32_t> i32(8, 1);
  auto fv = [&](int64_t offset, int64_t count) {
    return HostView(f.data() + offset, count, DType::kF32);
  };
  struct Case {
    std::string call;
    std::unique_ptr<Work> work;
    std::vector<std::string> needles;
  };
  std::vector<Case> cases;
  cases.push_back(
      {"AllReduce(null buffer)",
       comm.AllReduce(HostView(nullptr, 4, DType::kF32), ReduceOp::kSum),
       {"AllReduce" + on, "buf is null", "count is 4",
        "expected a pointer to 4 f32 elements"}});
  cases.push_back({"AllReduce(negative count)",
                   comm.AllReduce(fv(0, -3), ReduceOp::kSum),
                   {"AllReduce" + on, "buf.count must be >= 0; found -3"}});
  cases.push_back(
      {"AllReduce(i32, avg)",
       comm.AllReduce(HostView(i32.data(), 8, DType::kI32), ReduceOp::kAvg),
       {"AllReduce" + on, "avg needs a floating-point dtype", "found i32"}});
  cases.push_back(
      {"AllGather(short recv)",
       comm.AllGather(fv(0, 4), fv(4, 4 * n - 1)),
       {"AllGather" + on,
        absl::StrCat("recv.count must be world size x send.count = ", n,
                     " x 4 = ", 4 * n, " elements; found ", 4 * n - 1)}});
  cases.push_back(
      {"AllGather(dtype mismatch)",
       comm.AllGather(fv(0, 4), HostView(d.data(), 4 * n, DType::kF64)),
       {"AllGather" + on, "same dtype; found send f32 and recv f64"}});
  cases.push_back(
      {"ReduceScatter(long send)",
       comm.ReduceScatter(fv(0, 4 * n + 1), HostView(d.data(), 4, DType::kF32),
                          ReduceOp::kSum),
       {"ReduceScatter" + on,
        absl::StrCat("send.count must be world size x recv.count = ", n,
                     " x 4 = ", 4 * n, " elements; found ", 4 * n + 1)}});
  cases.push_back(
      {"Broadcast(root = world size)",
       comm.Broadcast(fv(0, 4), n),
       {"Broadcast" + on, absl::StrCat("root must be in [0, ", n, ")"),
        absl::StrCat("found root ", n)}});
  cases.push_back({"Broadcast(root = -1)",
                   comm.Broadcast(fv(0, 4), -1),
                   {"Broadcast" + on, "found root -1"}});
  cases.push_back({"Send(peer = world size)",
                   comm.Send(fv(0, 4), n),
                   {"Send" + on, absl::StrCat("peer must be in [0, ", n, ")"),
                    absl::StrCat("found peer ", n)}});
  cases.push_back({"Recv(peer = -1)",
                   comm.Recv(fv(0, 4), -1),
                   {"Recv" + on, "found peer -1"}});
  cases.push_back({"Send(to self)",
                   comm.Send(fv(0, 4), rank),
                   {"Send" + on, "peer must be another rank",
                    absl::StrCat("found peer ", rank, ", this rank itself")}});
  cases.push_back({"Recv(from self)",
                   comm.Recv(fv(0, 4), rank),
                   {"Recv" + on, "peer must be another rank"}});
  for (Case& c : cases) {
    if (absl::Status s = ExpectRejected(c.call, std::move(c.work), c.needles);
        !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("rank ", rank, ": ", s.message()));
    }
  }
  // The errors consumed nothing: the communicator is still in step.
  std::vector<int64_t> v(3, rank + 1);
  if (absl::Status s =
          comm.AllReduce(HostView(absl::MakeSpan(v)), ReduceOp::kSum)->Wait();
      !s.ok()) {
    return s;
  }
  const int64_t want = int64_t{n} * (n + 1) / 2;
  if (v[0] != want || v[2] != want) {
    return absl::InternalError(absl::StrCat("rank ", rank,
                                            ": all-reduce after "
                                            "the argument errors gave ",
                                            v[0], ", expected ", want));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<CollectiveCase> CollectiveCases(std::shared_ptr<Launcher> launcher,
                                            const SuiteOptions& options) {
  std::vector<CollectiveCase> cases;
  const int64_t max_bytes = MaxBytes(options);
  const std::vector<int64_t> small_counts = {0, 1, 7, 1000, 70001};
  auto add = [&](CollectiveCase c) {
    c.launcher = launcher;
    cases.push_back(std::move(c));
  };
  for (int n : options.world_sizes) {
    // Small sizes: the full cross product, three operations in flight.
    for (DType dt : kEveryDType) {
      for (int64_t count : small_counts) {
        for (ReduceOp op : ValidReduceOps(dt)) {
          add({.op = OpKind::kAllReduce,
               .dtype = dt,
               .reduce_op = op,
               .world_size = n,
               .count = count,
               .outstanding = 3});
          add({.op = OpKind::kReduceScatter,
               .dtype = dt,
               .reduce_op = op,
               .world_size = n,
               .count = count,
               .outstanding = 3});
        }
        add({.op = OpKind::kReduceScatter,
             .dtype = dt,
             .reduce_op = ReduceOp::kSum,
             .world_size = n,
             .count = count,
             .outstanding = 3,
             .in_place = true});
        for (bool in_place : {false, true}) {
          add({.op = OpKind::kAllGather,
               .dtype = dt,
               .world_size = n,
               .count = count,
               .outstanding = 3,
               .in_place = in_place});
        }
        std::vector<int> roots = {0};
        if (n > 2) roots.push_back(n / 2);
        if (n > 1) roots.push_back(n - 1);
        for (int root : roots) {
          add({.op = OpKind::kBroadcast,
               .dtype = dt,
               .world_size = n,
               .count = count,
               .outstanding = 3,
               .root = root});
        }
        if (n > 1) {
          add({.op = OpKind::kSend,
               .dtype = dt,
               .world_size = n,
               .count = count,
               .outstanding = 3});
        }
      }
    }
    add({.op = OpKind::kBarrier, .world_size = n, .outstanding = 3});

    // 1 MiB per rank, every dtype, two in flight: several chunks per rank.
    // Then the largest size, f32 for every op plus other dtypes for
    // AllReduce, one in flight.
    for (const auto& [bytes, outstanding] :
         {std::pair<int64_t, int>{int64_t{1} << 20, 2},
          std::pair<int64_t, int>{max_bytes, 1}}) {
      const bool largest = outstanding == 1;
      for (DType dt : kEveryDType) {
        const bool all_ops = !largest || dt == DType::kF32;
        const int64_t es = DTypeSize(dt);
        const ReduceOp op =
            IsFloatingPoint(dt) ? ReduceOp::kSum : ReduceOp::kMax;
        if (largest && dt != DType::kF32 && dt != DType::kBF16 &&
            dt != DType::kI64) {
          continue;
        }
        add({.op = OpKind::kAllReduce,
             .dtype = dt,
             .reduce_op = op,
             .world_size = n,
             .count = bytes / es,
             .outstanding = outstanding});
        if (!all_ops) continue;
        add({.op = OpKind::kReduceScatter,
             .dtype = dt,
             .reduce_op = op,
             .world_size = n,
             .count = bytes / es / n,
             .outstanding = outstanding});
        add({.op = OpKind::kAllGather,
             .dtype = dt,
             .world_size = n,
             .count = bytes / es / n,
             .outstanding = outstanding});
        add({.op = OpKind::kBroadcast,
             .dtype = dt,
             .world_size = n,
             .count = bytes / es,
             .outstanding = outstanding,
             .root = n - 1});
        if (n > 1) {
          add({.op = OpKind::kSend,
               .dtype = dt,
               .world_size = n,
               .count = bytes / es,
               .outstanding = outstanding});
        }
      }
    }
  }
  return cases;
}

std::vector<WorldCase> WorldCases(std::shared_ptr<Launcher> launcher,
                                  const SuiteOptions& options) {
  std::vector<WorldCase> cases;
  for (int n : options.world_sizes) cases.push_back({launcher, n});
  return cases;
}

std::string CollectiveCaseName(
    const ::testing::TestParamInfo<CollectiveCase>& info) {
  const CollectiveCase& c = info.param;
  std::string name =
      c.op == OpKind::kSend ? std::string("SendRecv") : OpKindName(c.op);
  if (c.op != OpKind::kBarrier) absl::StrAppend(&name, "_", DTypeName(c.dtype));
  if (c.op == OpKind::kAllReduce || c.op == OpKind::kReduceScatter) {
    absl::StrAppend(&name, "_", ReduceOpName(c.reduce_op));
  }
  absl::StrAppend(&name, "_n", c.world_size);
  if (c.op != OpKind::kBarrier) absl::StrAppend(&name, "_c", c.count);
  absl::StrAppend(&name, "_k", c.outstanding);
  if (c.op == OpKind::kBroadcast) absl::StrAppend(&name, "_root", c.root);
  if (c.in_place) absl::StrAppend(&name, "_inplace");
  return name;
}

std::string WorldCaseName(const ::testing::TestParamInfo<WorldCase>& info) {
  return absl::StrCat("n", info.param.world_size);
}

void PrintTo(const CollectiveCase& c, std::ostream* os) {
  *os << c.launcher->name() << " " << OpKindName(c.op) << " "
      << DTypeName(c.dtype) << " " << ReduceOpName(c.reduce_op)
      << " n=" << c.world_size << " count=" << c.count
      << " outstanding=" << c.outstanding << " root=" << c.root
      << (c.in_place ? " in place" : "");
}

void PrintTo(const WorldCase& c, std::ostream* os) {
  *os << c.launcher->name() << " n=" << c.world_size;
}

TEST_P(CollectiveConformanceTest, MatchesReference) {
  const CollectiveCase& c = GetParam();
  if (!c.launcher->CanRun(c.world_size).ok()) {
    GTEST_SKIP() << c.launcher->name() << " cannot run world size "
                 << c.world_size << " here";
  }
  Watchdog watchdog(DefaultWatchdogLimit(), TestName());
  const Expected expected = ComputeExpected(c);
  ExpectAllOk(c.launcher->Run(c.world_size,
                              [&](int rank, Communicator& comm) {
                                return RunCollectiveCase(c, expected, rank,
                                                         comm);
                              }),
              c.world_size, *c.launcher);
}

TEST_P(MixedOutstandingTest, EveryOpInFlightWaitedInAnyOrder) {
  const WorldCase& c = GetParam();
  if (!c.launcher->CanRun(c.world_size).ok()) GTEST_SKIP();
  Watchdog watchdog(DefaultWatchdogLimit(), TestName());
  ExpectAllOk(c.launcher->Run(c.world_size, RunMixed), c.world_size,
              *c.launcher);
}

TEST_P(BadInputConformanceTest, RejectedAtEnqueueWithExpectedAndFound) {
  const WorldCase& c = GetParam();
  if (!c.launcher->CanRun(c.world_size).ok()) GTEST_SKIP();
  Watchdog watchdog(DefaultWatchdogLimit(), TestName());
  ExpectAllOk(c.launcher->Run(c.world_size, RunBadInput), c.world_size,
              *c.launcher);
}

// A backend's test binary may instantiate only some of the suites.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CollectiveConformanceTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MixedOutstandingTest);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BadInputConformanceTest);

}  // namespace tandem::comm::conformance
