#include "bench/allreduce_sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/status/statusor.h"
#include "bench/flag_checks.h"
#include "bench/repeat_timer.h"
#include "comm/bandwidth.h"
#include "comm/types.h"

namespace tandem::bench {
namespace {

using comm::DType;
using comm::ReduceOp;

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status AllReduceOnce(comm::Communicator& comm,
                           const AllReduceSweep& sweep, std::vector<float>& buf,
                           int64_t count) {
  if (sweep.once) return sweep.once(buf, count);
  return comm
      .AllReduce(comm::HostView(buf.data(), count, DType::kF32), ReduceOp::kSum)
      ->Wait();
}

// The slowest rank's value of `v`.
absl::Status MaxOverRanks(comm::Communicator& comm, double& v) {
  return comm.AllReduce(comm::HostView(&v, 1, DType::kF64), ReduceOp::kMax)
      ->Wait();
}

// Seconds per all-reduce over `iters` operations, the slowest rank's.
absl::StatusOr<double> TimeAllReduce(comm::Communicator& comm,
                                     const AllReduceSweep& sweep,
                                     std::vector<float>& buf, int64_t count,
                                     int64_t iters) {
  if (absl::Status s = comm.Barrier(); !s.ok()) return s;
  const double start = Now();
  for (int64_t i = 0; i < iters; ++i) {
    if (absl::Status s = AllReduceOnce(comm, sweep, buf, count); !s.ok())
      return s;
  }
  double per_op = (Now() - start) / static_cast<double>(iters);
  if (absl::Status s = MaxOverRanks(comm, per_op); !s.ok()) return s;
  return per_op;
}

// `count`-float all-reduces untimed for about sweep.warmup_seconds, in
// batches whose length every rank agrees on (the slowest rank's time).
absl::Status WarmUp(comm::Communicator& comm, const AllReduceSweep& sweep,
                    std::vector<float>& buf, int64_t count) {
  if (sweep.warmup_seconds <= 0) return absl::OkStatus();
  absl::StatusOr<double> probe = TimeAllReduce(comm, sweep, buf, count, 2);
  if (!probe.ok()) return probe.status();
  const int64_t iters = WarmUpBatch(*probe);
  for (double spent = 2 * *probe; spent < sweep.warmup_seconds;) {
    absl::StatusOr<double> t = TimeAllReduce(comm, sweep, buf, count, iters);
    if (!t.ok()) return t.status();
    spent += *t * static_cast<double>(iters);
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CountWrong(comm::Communicator& comm,
                                   const AllReduceSweep& sweep,
                                   std::vector<float>& buf, int64_t count) {
  const int n = comm.size();
  auto value = [](int rank, int64_t i) {
    return static_cast<float>(rank * 8 + i % 7);
  };
  for (int64_t i = 0; i < count; ++i) buf[i] = value(comm.rank(), i);
  if (absl::Status s = AllReduceOnce(comm, sweep, buf, count); !s.ok())
    return s;
  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < n; ++q) want += value(q, i);
    wrong += buf[i] != want;
  }
  if (absl::Status s =
          comm.AllReduce(comm::HostView(&wrong, 1, DType::kI64), ReduceOp::kSum)
              ->Wait();
      !s.ok()) {
    return s;
  }
  return wrong;
}

}  // namespace

absl::Status RunAllReduceSweep(comm::Communicator& comm,
                               const AllReduceSweep& sweep) {
  const int n = comm.size();
  const comm::BandwidthTable table(comm::OpKind::kAllReduce, n);
  if (comm.rank() == 0) {
    std::printf("%s\n", sweep.title.c_str());
    std::fputs(table.Header().c_str(), stdout);
    std::fflush(stdout);
  }
  const int64_t max_count = std::max<int64_t>(sweep.max_bytes / 4, 1);
  std::vector<float> buf(max_count, 0.0f);
  bool warmed = false;
  for (int64_t bytes : GeometricSizes(std::max<int64_t>(4, sweep.min_bytes),
                                      sweep.max_bytes, 2)) {
    const int64_t count = bytes / 4;
    std::fill(buf.begin(), buf.begin() + count, 1.0f);
    if (!warmed) {
      warmed = true;
      if (absl::Status s = WarmUp(comm, sweep, buf, count); !s.ok()) return s;
      std::fill(buf.begin(), buf.begin() + count, 1.0f);
    }
    absl::StatusOr<double> probe =
        TimeAllReduce(comm, sweep, buf, count, 1);  // warm
    if (probe.ok()) probe = TimeAllReduce(comm, sweep, buf, count, 2);
    if (!probe.ok()) return probe.status();
    const int64_t iters = static_cast<int64_t>(std::clamp(
        sweep.target_seconds / std::max(*probe, 1e-9), 5.0, 100000.0));
    absl::StatusOr<double> seconds =
        TimeAllReduce(comm, sweep, buf, count, iters);
    if (!seconds.ok()) return seconds.status();
    absl::StatusOr<int64_t> wrong = CountWrong(comm, sweep, buf, count);
    if (!wrong.ok()) return wrong.status();
    if (comm.rank() == 0) {
      std::fputs(table
                     .Row({.bytes = count * 4,
                           .count = count,
                           .dtype = DType::kF32,
                           .redop = ReduceOp::kSum,
                           .seconds = *seconds,
                           .wrong = *wrong})
                     .c_str(),
                 stdout);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::bench
