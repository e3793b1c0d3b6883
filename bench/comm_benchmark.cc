// comm_benchmark: the nccl-tests table for the simulated cluster (ranks are
// threads of this process), every op, sizes 8 B to 256 MiB, world sizes 2, 4
// and 8; and, in the same run, a STREAM-like copy and add over buffers of the
// same size with the all-reduce's share of that bound.
//
//   ./bazelw run -c opt //bench:comm_benchmark
//   ./bazelw run -c opt //bench:comm_benchmark -- --world_sizes=2
//       --ops=all_reduce --min_bytes=4096 --max_bytes=67108864   (one line)
//
// Timing follows nccl-tests: per size, warm-up, then `iters` back-to-back
// operations (issue + Wait) between barriers; the time of one operation is
// the slowest rank's elapsed time / iters. Then the result is checked with
// exact values and wrong elements are counted in #wrong (summed over ranks).
// Before the first size, --warmup_seconds of that size's operation, untimed
// (the first second of a run is slower here; the peers do the same).
//
// The memory bound (all-reduce only). An in-place all-reduce of S bytes on n
// ranks in shared memory must at least read every rank's buffer once and
// write it once: 2 n S bytes of memory traffic, half reads, half writes, and
// every line written was just read (so no write-allocate read, and no
// streaming store can skip one). The bound runs that very access pattern on
// the same n threads, each over its own two S/2-byte arrays: "rmw" (a[i] =
// b[i] = a[i] + b[i]: read S, write S per thread, counted exactly; n S
// bytes touched in all, as the all-reduce's n buffers are). The bound is
// 2 n S / rmw bandwidth; the all-reduce's share is bound time /
// all-reduce time. STREAM's copy (c = a) and add (c = a + b) are printed
// beside it for reference, counted with the write-allocate read of c (3S,
// 4S), but the bound does not use them: a core that elides that read for
// whole-line stores makes their counted bandwidth up to 1.5x too high.
//
// How the share is kept from swinging between runs (bench/PERFORMANCE.md,
// "The copy bound"): the all-reduce's segments and the kernels' are
// interleaved (all-reduce, copy, add, rmw, all-reduce, ...), so the two
// sides of the ratio see the same stretch of a shared machine; every
// segment is timed on one clock from the first rank's start to the last
// rank's end (never the slowest rank's own elapsed time, which two ranks
// that did not overlap can make too short); and the all-reduce and rmw run
// on non-zero data (--fill), as gradients are. The page faults inside the
// timed segments are printed beside the share.
//
// Every time (all-reduces and bound kernels alike) is the fastest of
// --repeats timed segments: other processes only ever slow a segment down.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "bench/repeat_timer.h"
#include "comm/bandwidth.h"
#include "comm/communicator.h"
#include "comm/ordered/ordered_sum.h"
#include "comm/types.h"
#include "sim/sim.h"
#include "train/launch/builtin_engines.h"

ABSL_FLAG(std::string, world_sizes, "2,4,8", "Comma-separated world sizes.");
ABSL_FLAG(std::string, ops,
          "all_reduce,reduce_scatter,all_gather,broadcast,sendrecv",
          "Comma-separated ops: all_reduce, reduce_scatter, all_gather, "
          "broadcast, sendrecv, ordered_all_reduce (comm/ordered's sum in "
          "one fixed order: the virtual world's all-reduce).");
ABSL_FLAG(int64_t, min_bytes, 8, "Smallest size S, bytes.");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20, "Largest size S, bytes.");
ABSL_FLAG(int64_t, step_factor, 2, "Multiply the size by this each row.");
ABSL_FLAG(double, target_seconds, 0.02,
          "Aim for about this much timed work per row (sets the iterations).");
ABSL_FLAG(double, spin_us, -1,
          "sim::Options::spin in microseconds; negative keeps the default.");
ABSL_FLAG(bool, stream, true,
          "Also run the memory bound for all_reduce sizes >= 1 MiB.");
ABSL_FLAG(double, warmup_seconds, 1,
          "Before the first size of each op and world size, run that size's "
          "operation for this many seconds untimed (0: none). The first "
          "second of a run here times small operations up to 1.5x slower "
          "than the seconds after it (bench/PERFORMANCE.md, \"Warm-up\").");
ABSL_FLAG(int64_t, repeats, 3,
          "Timed segments per row; each row reports the fastest.");
ABSL_FLAG(std::string, fill, "tiny",
          "What the timed all-reduces and the bound's rmw run on: tiny (a "
          "small non-zero value, as gradients are) or zeros (to see whether "
          "this machine treats zeros written over zeros differently).");

namespace tandem {
namespace {

using comm::BufferView;
using comm::DType;
using comm::OpKind;
using comm::ReduceOp;

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct OpSpec {
  std::string flag;
  OpKind op;
  bool ordered = false;  // comm::OrderedAllReduce in place of AllReduce
};

const std::vector<OpSpec>& AllOps() {
  static const auto* ops = new std::vector<OpSpec>{
      {"all_reduce", OpKind::kAllReduce},
      {"reduce_scatter", OpKind::kReduceScatter},
      {"all_gather", OpKind::kAllGather},
      {"broadcast", OpKind::kBroadcast},
      {"sendrecv", OpKind::kSend},
      {"ordered_all_reduce", OpKind::kAllReduce, /*ordered=*/true},
  };
  return *ops;
}

// One row measured by the ranks; rank 0 fills it.
struct Row {
  int64_t bytes = 0;
  int64_t count = 0;
  double seconds = 0;
  int64_t wrong = 0;
  double copy_gbps = 0;  // STREAM, all-reduce only
  double add_gbps = 0;
  double rmw_gbps = 0;  // the bound's kernel
  // Page faults inside the timed segments (all ranks): the op's, the rmw's.
  int64_t faults = 0;
  int64_t bound_faults = 0;
};

// Elements each rank contributes for total size S (nccl-tests' "count").
int64_t CountFor(OpKind op, int64_t bytes, int n) {
  const int64_t elems = bytes / 4;
  if (op == OpKind::kAllGather || op == OpKind::kReduceScatter)
    return elems / n;
  return elems;
}

// Buffers of one rank for one op at the largest size.
struct Buffers {
  std::vector<float> a;  // AllReduce/Broadcast buf; AG/RS send; Send
  std::vector<float> b;  // AG/RS recv; Recv
  comm::OrderedSumWorkspace ordered;  // ordered_all_reduce's staging
};

absl::Status Issue(comm::Communicator& comm, OpKind op, bool ordered,
                   Buffers& buf, int64_t count) {
  const int n = comm.size();
  const int r = comm.rank();
  auto view = [](std::vector<float>& v, int64_t c) {
    return comm::HostView(v.data(), c, DType::kF32);
  };
  switch (op) {
    case OpKind::kAllReduce:
      if (ordered) {
        return comm::OrderedAllReduce(comm, view(buf.a, count), &buf.ordered);
      }
      return comm.AllReduce(view(buf.a, count), ReduceOp::kSum)->Wait();
    case OpKind::kReduceScatter:
      return comm
          .ReduceScatter(view(buf.a, n * count), view(buf.b, count),
                         ReduceOp::kSum)
          ->Wait();
    case OpKind::kAllGather:
      return comm.AllGather(view(buf.a, count), view(buf.b, n * count))->Wait();
    case OpKind::kBroadcast:
      return comm.Broadcast(view(buf.a, count), 0)->Wait();
    default: {
      // Ring exchange: send to r + 1 while receiving from r - 1.
      auto send = comm.Send(view(buf.a, count), (r + 1) % n);
      auto recv = comm.Recv(view(buf.b, count), (r + n - 1) % n);
      absl::Status s = send->Wait();
      absl::Status t = recv->Wait();
      return s.ok() ? t : s;
    }
  }
}

// Fills with exact values, runs the op once, and counts wrong elements.
int64_t CountWrong(comm::Communicator& comm, OpKind op, bool ordered,
                   Buffers& buf, int64_t count, absl::Status& status) {
  const int n = comm.size();
  const int r = comm.rank();
  auto value = [](int rank, int64_t i) {
    return static_cast<float>(rank * 8 + i % 7);
  };
  const int64_t send_count = op == OpKind::kReduceScatter ? n * count : count;
  for (int64_t i = 0; i < send_count; ++i) buf.a[i] = value(r, i);
  status = Issue(comm, op, ordered, buf, count);
  if (!status.ok()) return -1;
  int64_t wrong = 0;
  switch (op) {
    case OpKind::kAllReduce:
    case OpKind::kReduceScatter: {
      const int64_t base = op == OpKind::kReduceScatter ? r * count : 0;
      const float* out =
          op == OpKind::kReduceScatter ? buf.b.data() : buf.a.data();
      for (int64_t i = 0; i < count; ++i) {
        float want = 0;
        for (int q = 0; q < n; ++q) want += value(q, base + i);
        wrong += out[i] != want;
      }
      break;
    }
    case OpKind::kAllGather:
      for (int q = 0; q < n; ++q) {
        for (int64_t i = 0; i < count; ++i) {
          wrong += buf.b[q * count + i] != value(q, i);
        }
      }
      break;
    case OpKind::kBroadcast:
      for (int64_t i = 0; i < count; ++i) wrong += buf.a[i] != value(0, i);
      break;
    default:
      for (int64_t i = 0; i < count; ++i) {
        wrong += buf.b[i] != value((r + n - 1) % n, i);
      }
      break;
  }
  return wrong;
}

// Minor and major page faults of the calling thread so far.
int64_t ThreadFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<int64_t>(u.ru_minflt) + static_cast<int64_t>(u.ru_majflt);
}

// One timed segment as every rank saw it.
struct Segment {
  double seconds = 0;  // first rank's start to last rank's end
  int64_t faults = 0;  // page faults inside it, summed over ranks
};

// Times `body` run `iters` times on every rank, on one clock for all ranks:
// from the earliest rank's start to the latest rank's end. Each rank timing
// only itself (and taking the slowest) could read faster than the work
// allows: two ranks that did not overlap (one ran while the other waited
// for a core) each had the memory to itself, and a bound measured that way
// came out up to 2x too fast (bench/PERFORMANCE.md, "The copy bound"). On
// one clock, a segment can only be slowed down by what else runs.
// `prepare` runs on each rank before the segment, untimed.
template <typename Prepare, typename Body>
absl::Status TimeIt(comm::Communicator& comm, int64_t iters, Prepare prepare,
                    Body body, Segment& segment) {
  prepare();
  if (absl::Status s = comm.Barrier(); !s.ok()) return s;
  const int64_t faults = ThreadFaults();
  const double start = Now();
  for (int64_t i = 0; i < iters; ++i) {
    if (absl::Status s = body(); !s.ok()) return s;
  }
  const double end = Now();
  // {latest end, -(earliest start), faults} in one all-reduce: max, max and
  // (faults are never negative) an upper bound of the sum we print below.
  double v[3] = {end, -start, static_cast<double>(ThreadFaults() - faults)};
  double sum_faults = v[2];
  if (absl::Status s =
          comm.AllReduce(comm::HostView(v, 3, DType::kF64), ReduceOp::kMax)
              ->Wait();
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          comm.AllReduce(comm::HostView(&sum_faults, 1, DType::kF64),
                         ReduceOp::kSum)
              ->Wait();
      !s.ok()) {
    return s;
  }
  segment.seconds = v[0] + v[1];
  segment.faults = static_cast<int64_t>(sum_faults);
  return absl::OkStatus();
}

// Iterations for about --target_seconds of `body`, the same on every rank
// (from one all-ranks probe after a warm-up).
template <typename Prepare, typename Body>
absl::Status Calibrate(comm::Communicator& comm, Prepare prepare, Body body,
                       int64_t& iters) {
  Segment probe;
  if (absl::Status s = TimeIt(comm, 1, prepare, body, probe); !s.ok()) {
    return s;  // warm
  }
  if (absl::Status s = TimeIt(comm, 2, prepare, body, probe); !s.ok()) {
    return s;
  }
  iters = static_cast<int64_t>(std::clamp(
      absl::GetFlag(FLAGS_target_seconds) / std::max(probe.seconds / 2, 1e-9),
      2.0, 200000.0));
  return absl::OkStatus();
}

// A measured body: its iterations, its fastest segment per op and the page
// faults of all its timed segments.
struct Timed {
  int64_t iters = 0;
  double per_op = 0;  // seconds; 0 until a segment is added
  int64_t segments = 0;
  int64_t faults = 0;

  void Add(const Segment& s) {
    const double t = s.seconds / static_cast<double>(iters);
    per_op = segments++ == 0 ? t : std::min(per_op, t);
    faults += s.faults;
  }
};

// What MeasureInterleaved times: `prepare` on each rank before every
// segment (untimed), then `run` back to back.
struct Body {
  std::function<void()> prepare;
  std::function<absl::Status()> run;
};

// --repeats segments of each body, interleaved (A B C, A B C, ...): each
// body reports its fastest segment, and bodies compared with each other
// (the all-reduce and its bound) see the same stretch of the machine's
// weather rather than one each.
absl::Status MeasureInterleaved(comm::Communicator& comm,
                                absl::Span<const Body> bodies,
                                std::vector<Timed>& out) {
  out.assign(bodies.size(), Timed{});
  for (size_t b = 0; b < bodies.size(); ++b) {
    if (absl::Status s =
            Calibrate(comm, bodies[b].prepare, bodies[b].run, out[b].iters);
        !s.ok()) {
      return s;
    }
  }
  for (int64_t r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    for (size_t b = 0; b < bodies.size(); ++b) {
      Segment seg;
      if (absl::Status s =
              TimeIt(comm, out[b].iters, bodies[b].prepare, bodies[b].run, seg);
          !s.ok()) {
        return s;
      }
      out[b].Add(seg);
    }
  }
  return absl::OkStatus();
}

// Runs `body` untimed for about --warmup_seconds, in segments of about
// 50 ms whose length every rank agrees on (TimeIt's all-ranks clock), so
// every rank issues the same operations. Why: on this machine the first
// second of a run times small collectives up to 1.5x slower than the rest
// (whichever size comes first), and the per-size warm-up of a few
// operations does not cover it.
absl::Status WarmUp(comm::Communicator& comm, const Body& body) {
  const double seconds = absl::GetFlag(FLAGS_warmup_seconds);
  if (seconds <= 0) return absl::OkStatus();
  Segment probe;
  if (absl::Status s = TimeIt(comm, 2, body.prepare, body.run, probe);
      !s.ok()) {
    return s;
  }
  const int64_t iters = bench::WarmUpBatch(probe.seconds / 2);
  for (double spent = probe.seconds; spent < seconds;) {
    Segment seg;
    if (absl::Status s = TimeIt(comm, iters, body.prepare, body.run, seg);
        !s.ok()) {
      return s;
    }
    spent += seg.seconds;
  }
  return absl::OkStatus();
}

// The STREAM kernels as plain loops: GCC would otherwise turn the copy into
// a memcpy call, whose non-temporal stores skip the write-allocate read the
// bound accounts for.
#if defined(__GNUC__) && !defined(__clang__)
#define TANDEM_PLAIN_LOOP \
  __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define TANDEM_PLAIN_LOOP
#endif

TANDEM_PLAIN_LOOP void CopyKernel(const float* __restrict a,
                                  float* __restrict c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i];
}

TANDEM_PLAIN_LOOP void AddKernel(const float* __restrict a,
                                 const float* __restrict b, float* __restrict c,
                                 int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

// The all-reduce's own access pattern on one thread: both arrays read,
// their sum written back to both (the lines written were just read). No
// TANDEM_PLAIN_LOOP: there is no memcpy pattern to keep out, and GCC's
// optimize attribute kept this loop from being vectorised.
void RmwKernel(float* __restrict a, float* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = a[i] + b[i];
    a[i] = s;
    b[i] = s;
  }
}

// The value every timed all-reduce and rmw starts from (the --fill flag):
// 2^-100, exact, non-zero. An all-reduce of n ranks multiplies it by n per
// operation, exactly, so a 64 MiB segment (tens of operations) stays
// finite; the many operations of a small size's segment may reach
// infinity, which costs an add no more than a finite value does.
float FillValue() {
  return absl::GetFlag(FLAGS_fill) == "zeros" ? 0.0f : std::ldexp(1.0f, -100);
}

// This rank's STREAM arrays of `count` floats (first touched here, by this
// rank's thread, as the all-reduce's buffers are) and the bodies of copy,
// add and the bound's rmw on them.
struct StreamArrays {
  explicit StreamArrays(int64_t count)
      : count(count),
        half(count / 2),
        a(count, 1.0f),
        b(count, 2.0f),
        c(count, 0.0f) {}

  std::vector<Body> Bodies() {
    // rmw runs on the first halves of a and b: two S/2-byte streams per
    // thread, as each rank's share of a 2-rank all-reduce is (its slice of
    // both buffers), so that the bound moves the all-reduce's 2 n S bytes
    // over the all-reduce's footprint (n S in all, not 2 n S: with a 32 MiB
    // L3 and 64 MiB buffers, a bigger footprint would only slow the bound
    // down). a = b = a + b doubles its values every call: it starts from
    // FillValue() each segment.
    return {
        {[] {},
         [this] {
           CopyKernel(a.data(), c.data(), count);
           return absl::OkStatus();
         }},
        {[] {},
         [this] {
           AddKernel(a.data(), b.data(), c.data(), count);
           return absl::OkStatus();
         }},
        {[this] {
           std::fill(a.begin(), a.begin() + half, FillValue());
           std::fill(b.begin(), b.begin() + half, FillValue());
         },
         [this] {
           RmwKernel(a.data(), b.data(), half);
           return absl::OkStatus();
         }},
    };
  }

  int64_t count;
  int64_t half;  // rmw's elements per array
  std::vector<float> a, b, c;
};

// Never empty once CheckFlags passed (4 <= max_bytes).
std::vector<int64_t> Sizes() {
  return bench::GeometricSizes(
      std::max<int64_t>(4, absl::GetFlag(FLAGS_min_bytes)),
      absl::GetFlag(FLAGS_max_bytes), absl::GetFlag(FLAGS_step_factor));
}

// The numeric flags, before anything runs: a usage error names the flag.
// Memory: per rank at most two buffers of S bytes plus the STREAM arrays
// (three of S), so 5 x world x max_bytes over the process.
absl::Status CheckFlags(int max_world) {
  const int64_t min_bytes = absl::GetFlag(FLAGS_min_bytes);
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_bytes);
  TANDEM_RETURN_IF_ERROR(
      bench::CheckSizeSweep(min_bytes, max_bytes, int64_t{5} * max_world,
                            absl::GetFlag(FLAGS_target_seconds)));
  TANDEM_RETURN_IF_ERROR(bench::CheckInt(
      "--step_factor", absl::GetFlag(FLAGS_step_factor), 2, INT64_MAX));
  TANDEM_RETURN_IF_ERROR(
      bench::CheckInt("--repeats", absl::GetFlag(FLAGS_repeats), 1, 1000));
  TANDEM_RETURN_IF_ERROR(
      bench::CheckWarmUpSeconds(absl::GetFlag(FLAGS_warmup_seconds)));
  if (absl::GetFlag(FLAGS_fill) != "tiny" &&
      absl::GetFlag(FLAGS_fill) != "zeros") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fill must be tiny or zeros, got '", absl::GetFlag(FLAGS_fill), "'"));
  }
  const double spin = absl::GetFlag(FLAGS_spin_us);
  if (std::isnan(spin) || spin > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--spin_us must be negative (the default) or at most 1e6 (one "
        "second), got ",
        spin));
  }
  return absl::OkStatus();
}

std::string HumanBytes(int64_t b) {
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0) {
    return absl::StrCat(b >> 20, " MiB");
  }
  if (b >= 1024 && b % 1024 == 0) return absl::StrCat(b >> 10, " KiB");
  return absl::StrCat(b, " B");
}

struct Targets {
  std::optional<double> share_64mib;  // 2 ranks
  std::optional<double> us_4kib;      // 2 ranks
};

absl::Status RunOp(int n, const OpSpec& spec, Targets& targets) {
  const std::vector<int64_t> sizes = Sizes();
  const OpKind op = spec.op;
  const comm::BandwidthTable table(op, n);
  std::printf(
      "\n# %s, %d ranks (sim), f32%s\n",
      spec.ordered          ? "AllReduce (ordered: comm/ordered)"
      : op == OpKind::kSend ? "SendRecv (ring)"
                            : comm::OpKindName(op).c_str(),
      n,
      op == OpKind::kAllReduce || op == OpKind::kReduceScatter ? ", sum" : "");
  std::fputs(table.Header().c_str(), stdout);
  std::fflush(stdout);
  std::map<int64_t, Row> rows;
  train::RunOptions options;
  if (absl::GetFlag(FLAGS_spin_us) >= 0) {
    options.spin = absl::Microseconds(absl::GetFlag(FLAGS_spin_us));
  }
  const absl::Status status = train::BuiltinEngines().Run(
      {"sim", n}, options, [&](comm::Communicator& comm) {
        const int rank = comm.rank();
        const int64_t max_count = CountFor(op, sizes.back(), n);
        Buffers buf;
        const bool gathers =
            op == OpKind::kAllGather || op == OpKind::kReduceScatter;
        buf.a.assign(op == OpKind::kReduceScatter ? n * max_count : max_count,
                     0.0f);
        if (gathers || op == OpKind::kSend) {
          buf.b.assign(op == OpKind::kAllGather ? n * max_count : max_count,
                       0.0f);
        }
        bool warmed = false;
        for (int64_t bytes : sizes) {
          const int64_t count = CountFor(op, bytes, n);
          if (count == 0) continue;
          Row row;
          row.count = count;
          row.bytes = (gathers ? n * count : count) * 4;
          // The all-reduce, and for the bound's sizes copy, add and rmw
          // interleaved with it.
          std::vector<Body> bodies = {
              {[&] {
                 const int64_t sent =
                     op == OpKind::kReduceScatter ? n * count : count;
                 std::fill(buf.a.begin(), buf.a.begin() + sent, FillValue());
               },
               [&] { return Issue(comm, op, spec.ordered, buf, count); }}};
          if (!warmed) {  // the first size this op runs
            warmed = true;
            if (absl::Status s = WarmUp(comm, bodies[0]); !s.ok()) return s;
          }
          std::optional<StreamArrays> arrays;
          if (op == OpKind::kAllReduce && absl::GetFlag(FLAGS_stream) &&
              bytes >= (int64_t{1} << 20)) {
            arrays.emplace(count);
            for (Body& b : arrays->Bodies()) bodies.push_back(std::move(b));
          }
          std::vector<Timed> timed;
          if (absl::Status s = MeasureInterleaved(comm, bodies, timed);
              !s.ok()) {
            return s;
          }
          row.seconds = timed[0].per_op;
          row.faults = timed[0].faults;
          if (arrays.has_value()) {
            const double n = comm.size();
            const double elems = static_cast<double>(count);
            // copy: read a, allocate c, write c; add: read a and b,
            // allocate c, write c; rmw: read a and b, write a and b.
            row.copy_gbps = n * 3.0 * elems * 4 / timed[1].per_op / 1e9;
            row.add_gbps = n * 4.0 * elems * 4 / timed[2].per_op / 1e9;
            row.rmw_gbps = n * 4.0 * static_cast<double>(arrays->half) * 4 /
                           timed[3].per_op / 1e9;
            row.bound_faults = timed[3].faults;
          }
          arrays.reset();
          absl::Status status;
          int64_t wrong =
              CountWrong(comm, op, spec.ordered, buf, count, status);
          if (!status.ok()) return status;
          if (absl::Status s =
                  comm.AllReduce(comm::HostView(&wrong, 1, DType::kI64),
                                 ReduceOp::kSum)
                      ->Wait();
              !s.ok()) {
            return s;
          }
          row.wrong = wrong;
          if (rank == 0) {
            std::fputs(
                table
                    .Row({.bytes = row.bytes,
                          .count = row.count,
                          .dtype = DType::kF32,
                          .redop = op == OpKind::kAllReduce ||
                                           op == OpKind::kReduceScatter
                                       ? std::optional<ReduceOp>(ReduceOp::kSum)
                                       : std::nullopt,
                          .seconds = row.seconds,
                          .wrong = row.wrong})
                    .c_str(),
                stdout);
            std::fflush(stdout);
            rows[bytes] = row;
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;

  if (op == OpKind::kAllReduce && n == 2) {
    if (auto it = rows.find(4096); it != rows.end()) {
      targets.us_4kib = it->second.seconds * 1e6;
    }
  }
  if (op == OpKind::kAllReduce && absl::GetFlag(FLAGS_stream)) {
    std::printf(
        "\n# STREAM-like bound for the AllReduce above, %d threads, each on "
        "its own S-byte arrays\n# (copy and add for reference, counted with "
        "write-allocate: 3S and 4S per thread;\n# rmw = a = b = a + b on the "
        "first S/2 of a and b, 2S per thread, the AllReduce's access\n# "
        "pattern and footprint). AllReduce memory "
        "traffic: every buffer read and written once, 2 x %d x S bytes; "
        "bound = that traffic at\n# the rmw bandwidth. share = bound / "
        "AllReduce time. Each figure: the fastest of --repeats segments,\n# "
        "the AllReduce's and the kernels' interleaved, each timed from the "
        "first rank's start to\n# the last rank's end, on --fill=%s data. "
        "faults: page faults in all timed segments\n# of the AllReduce and "
        "of rmw (every rank).\n",
        n, n, absl::GetFlag(FLAGS_fill).c_str());
    std::printf("# %12s | %9s  %9s  %9s | %9s  %11s  %12s  %6s | %6s  %6s\n",
                "size", "copy", "add", "rmw", "bound", "AllReduce", "AllReduce",
                "share", "faults", "faults");
    std::printf("# %12s | %9s  %9s  %9s | %9s  %11s  %12s  %6s | %6s  %6s\n",
                "(B)", "(GB/s)", "(GB/s)", "(GB/s)", "(us)", "(us)",
                "mem (GB/s)", "", "op", "rmw");
    for (const auto& [bytes, row] : rows) {
      if (row.rmw_gbps <= 0) continue;
      const double traffic = 2.0 * n * row.bytes;
      const double bound_s = traffic / (row.rmw_gbps * 1e9);
      const double share = bound_s / row.seconds;
      std::printf(
          "  %12lld | %9.2f  %9.2f  %9.2f | %9.1f  %11.1f  %12.2f  %5.1f%% | "
          "%6lld  %6lld\n",
          static_cast<long long>(row.bytes), row.copy_gbps, row.add_gbps,
          row.rmw_gbps, bound_s * 1e6, row.seconds * 1e6,
          traffic / row.seconds / 1e9, share * 100,
          static_cast<long long>(row.faults),
          static_cast<long long>(row.bound_faults));
      if (n == 2 && bytes == (int64_t{64} << 20)) targets.share_64mib = share;
    }
  }
  std::fflush(stdout);
  return absl::OkStatus();
}

int Main() {
  std::vector<int> worlds;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_world_sizes),
                                            ',', absl::SkipEmpty())) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1 || n > sim::kMaxWorldSize) {
      std::fprintf(stderr, "comm_benchmark: bad world size '%s'\n",
                   std::string(w).c_str());
      return 2;
    }
    worlds.push_back(n);
  }
  std::vector<OpSpec> ops;
  for (absl::string_view o :
       absl::StrSplit(absl::GetFlag(FLAGS_ops), ',', absl::SkipEmpty())) {
    auto it = std::find_if(AllOps().begin(), AllOps().end(),
                           [&](const OpSpec& s) { return s.flag == o; });
    if (it == AllOps().end()) {
      std::fprintf(stderr,
                   "comm_benchmark: unknown op '%s'; expected all_reduce, "
                   "reduce_scatter, all_gather, broadcast or sendrecv\n",
                   std::string(o).c_str());
      return 2;
    }
    ops.push_back(*it);
  }
  if (worlds.empty()) {
    std::fprintf(stderr, "comm_benchmark: --world_sizes lists no world size\n");
    return 2;
  }
  if (absl::Status s =
          CheckFlags(*std::max_element(worlds.begin(), worlds.end()));
      !s.ok()) {
    std::fprintf(stderr, "comm_benchmark: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  std::printf(
      "# tandem comm_benchmark: sim backend (ranks are threads of one "
      "process), %u hardware threads\n# sizes %s to %s; size S and busbw as in "
      "nccl-tests (AllGather/ReduceScatter: S = n x count x 4)\n",
      std::thread::hardware_concurrency(),
      HumanBytes(absl::GetFlag(FLAGS_min_bytes)).c_str(),
      HumanBytes(absl::GetFlag(FLAGS_max_bytes)).c_str());
  Targets targets;
  for (int n : worlds) {
    for (const OpSpec& spec : ops) {
      if (spec.op == OpKind::kSend && n < 2) continue;
      if (absl::Status s = RunOp(n, spec, targets); !s.ok()) {
        std::fprintf(stderr, "comm_benchmark: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  std::printf("\n");
  if (targets.share_64mib.has_value()) {
    std::printf(
        "# target: 64 MiB f32 all-reduce at 2 ranks reaches %.1f %% of the "
        "STREAM bound (target >= 70 %%)\n",
        *targets.share_64mib * 100);
  }
  if (targets.us_4kib.has_value()) {
    std::printf(
        "# target: 4 KiB f32 all-reduce at 2 ranks takes %.2f us (target <= "
        "5 us)\n",
        *targets.us_4kib);
  }
  return 0;
}

}  // namespace
}  // namespace tandem

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "comm_benchmark",
           .summary = "Times the sim backend's collectives and prints the "
                      "nccl-tests table.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  return tandem::Main();
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("comm_benchmark")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("comm_benchmark", Run(argc, argv));
}
