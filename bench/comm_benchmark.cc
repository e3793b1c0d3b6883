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
//
// The memory bound (all-reduce only). An in-place all-reduce of S bytes on n
// ranks in shared memory must at least read every rank's buffer once and
// write it once: 2 n S bytes of memory traffic, half reads, half writes, and
// every line written was just read (so no write-allocate read, and no
// streaming store can skip one). The bound runs that very access pattern on
// the same n threads, each over its own two S-byte arrays: "rmw" (a[i] =
// b[i] = a[i] + b[i]: read 2S, write 2S per thread, counted exactly). The
// bound is 2 n S / rmw bandwidth; the all-reduce's share is bound time /
// all-reduce time. STREAM's copy (c = a) and add (c = a + b) are printed
// beside it for reference, counted with the write-allocate read of c (3S,
// 4S), but the bound no longer uses them: a core that elides that read for
// whole-line stores (some do, only under bandwidth pressure) makes their
// counted bandwidth up to 1.5x too high, which made the share swing between
// runs (bench/PERFORMANCE.md, "The copy bound").
//
// Every time (all-reduces and bound kernels alike) is the fastest of
// --repeats timed segments: other processes only ever slow a segment down.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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
#include "bench/flag_checks.h"
#include "comm/bandwidth.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "sim/sim.h"
#include "train/launch/builtin_engines.h"

ABSL_FLAG(std::string, world_sizes, "2,4,8", "Comma-separated world sizes.");
ABSL_FLAG(std::string, ops,
          "all_reduce,reduce_scatter,all_gather,broadcast,sendrecv",
          "Comma-separated ops: all_reduce, reduce_scatter, all_gather, "
          "broadcast, sendrecv.");
ABSL_FLAG(int64_t, min_bytes, 8, "Smallest size S, bytes.");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20, "Largest size S, bytes.");
ABSL_FLAG(int64_t, step_factor, 2, "Multiply the size by this each row.");
ABSL_FLAG(double, target_seconds, 0.02,
          "Aim for about this much timed work per row (sets the iterations).");
ABSL_FLAG(double, spin_us, -1,
          "sim::Options::spin in microseconds; negative keeps the default.");
ABSL_FLAG(bool, stream, true,
          "Also run the memory bound for all_reduce sizes >= 1 MiB.");
ABSL_FLAG(int64_t, repeats, 3,
          "Timed segments per row; each row reports the fastest.");

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
};

const std::vector<OpSpec>& AllOps() {
  static const auto* ops = new std::vector<OpSpec>{
      {"all_reduce", OpKind::kAllReduce},
      {"reduce_scatter", OpKind::kReduceScatter},
      {"all_gather", OpKind::kAllGather},
      {"broadcast", OpKind::kBroadcast},
      {"sendrecv", OpKind::kSend},
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
};

absl::Status Issue(comm::Communicator& comm, OpKind op, Buffers& buf,
                   int64_t count) {
  const int n = comm.size();
  const int r = comm.rank();
  auto view = [](std::vector<float>& v, int64_t c) {
    return comm::HostView(v.data(), c, DType::kF32);
  };
  switch (op) {
    case OpKind::kAllReduce:
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
int64_t CountWrong(comm::Communicator& comm, OpKind op, Buffers& buf,
                   int64_t count, absl::Status& status) {
  const int n = comm.size();
  const int r = comm.rank();
  auto value = [](int rank, int64_t i) {
    return static_cast<float>(rank * 8 + i % 7);
  };
  const int64_t send_count = op == OpKind::kReduceScatter ? n * count : count;
  for (int64_t i = 0; i < send_count; ++i) buf.a[i] = value(r, i);
  status = Issue(comm, op, buf, count);
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

// Max over ranks of a double (through the communicator being measured).
absl::Status MaxOverRanks(comm::Communicator& comm, double& v) {
  return comm.AllReduce(comm::HostView(&v, 1, DType::kF64), ReduceOp::kMax)
      ->Wait();
}

// Times `body` run `iters` times on every rank: the slowest rank's seconds.
template <typename Body>
absl::Status TimeIt(comm::Communicator& comm, int64_t iters, Body body,
                    double& seconds) {
  if (absl::Status s = comm.Barrier(); !s.ok()) return s;
  const double start = Now();
  for (int64_t i = 0; i < iters; ++i) {
    if (absl::Status s = body(); !s.ok()) return s;
  }
  seconds = Now() - start;
  return MaxOverRanks(comm, seconds);
}

// Every rank computes the same count from the same (all-reduced) probe.
template <typename Body>
absl::Status Measure(comm::Communicator& comm, Body body, double& per_op) {
  double probe = 0;
  if (absl::Status s = TimeIt(comm, 1, body, probe); !s.ok()) return s;  // warm
  if (absl::Status s = TimeIt(comm, 2, body, probe); !s.ok()) return s;
  const int64_t iters = static_cast<int64_t>(std::clamp(
      absl::GetFlag(FLAGS_target_seconds) / std::max(probe / 2, 1e-9), 2.0,
      200000.0));
  per_op = 0;
  for (int64_t r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    double total = 0;
    if (absl::Status s = TimeIt(comm, iters, body, total); !s.ok()) return s;
    const double t = total / static_cast<double>(iters);
    if (r == 0 || t < per_op) per_op = t;
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

// STREAM copy and add, and the bound's rmw, on this rank's own arrays of
// `count` floats (first touched here, by this rank's thread, as the
// all-reduce's buffers are).
absl::Status Stream(comm::Communicator& comm, int64_t count, double& copy_gbps,
                    double& add_gbps, double& rmw_gbps) {
  std::vector<float> a(count, 1.0f), b(count, 2.0f), c(count, 0.0f);
  double t = 0;
  if (absl::Status s = Measure(
          comm,
          [&] {
            CopyKernel(a.data(), c.data(), count);
            return absl::OkStatus();
          },
          t);
      !s.ok()) {
    return s;
  }
  const double n = comm.size();
  copy_gbps = n * 3.0 * count * 4 / t / 1e9;  // read a, allocate c, write c
  if (absl::Status s = Measure(
          comm,
          [&] {
            AddKernel(a.data(), b.data(), c.data(), count);
            return absl::OkStatus();
          },
          t);
      !s.ok()) {
    return s;
  }
  // read a and b, allocate c, write c
  add_gbps = n * 4.0 * count * 4 / t / 1e9;
  // Zeros stay zero: from other values, a = b = a + b doubles them every
  // call, and they would overflow to infinity during the timing.
  std::fill(a.begin(), a.end(), 0.0f);
  std::fill(b.begin(), b.end(), 0.0f);
  if (absl::Status s = Measure(
          comm,
          [&] {
            RmwKernel(a.data(), b.data(), count);
            return absl::OkStatus();
          },
          t);
      !s.ok()) {
    return s;
  }
  rmw_gbps = n * 4.0 * count * 4 / t / 1e9;  // read a and b, write a and b
  return absl::OkStatus();
}

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
      op == OpKind::kSend ? "SendRecv (ring)" : comm::OpKindName(op).c_str(), n,
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
        for (int64_t bytes : sizes) {
          const int64_t count = CountFor(op, bytes, n);
          if (count == 0) continue;
          Row row;
          row.count = count;
          row.bytes = (gathers ? n * count : count) * 4;
          std::fill(buf.a.begin(), buf.a.end(), 0.0f);
          if (absl::Status s = Measure(
                  comm, [&] { return Issue(comm, op, buf, count); },
                  row.seconds);
              !s.ok()) {
            return s;
          }
          absl::Status status;
          int64_t wrong = CountWrong(comm, op, buf, count, status);
          if (!status.ok()) return status;
          if (absl::Status s =
                  comm.AllReduce(comm::HostView(&wrong, 1, DType::kI64),
                                 ReduceOp::kSum)
                      ->Wait();
              !s.ok()) {
            return s;
          }
          row.wrong = wrong;
          if (op == OpKind::kAllReduce && absl::GetFlag(FLAGS_stream) &&
              bytes >= (int64_t{1} << 20)) {
            if (absl::Status s = Stream(comm, count, row.copy_gbps,
                                        row.add_gbps, row.rmw_gbps);
                !s.ok()) {
              return s;
            }
          }
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
        "write-allocate: 3S and 4S per thread;\n# rmw = a = b = a + b, 4S per "
        "thread, the AllReduce's access pattern). AllReduce memory\n# "
        "traffic: every buffer read and written once, 2 x %d x S bytes; "
        "bound = that traffic at\n# the rmw bandwidth. share = bound / "
        "AllReduce time.\n",
        n, n);
    std::printf("# %12s | %9s  %9s  %9s | %9s  %11s  %12s  %6s\n", "size",
                "copy", "add", "rmw", "bound", "AllReduce", "AllReduce",
                "share");
    std::printf("# %12s | %9s  %9s  %9s | %9s  %11s  %12s  %6s\n", "(B)",
                "(GB/s)", "(GB/s)", "(GB/s)", "(us)", "(us)", "mem (GB/s)", "");
    for (const auto& [bytes, row] : rows) {
      if (row.rmw_gbps <= 0) continue;
      const double traffic = 2.0 * n * row.bytes;
      const double bound_s = traffic / (row.rmw_gbps * 1e9);
      const double share = bound_s / row.seconds;
      std::printf(
          "  %12lld | %9.2f  %9.2f  %9.2f | %9.1f  %11.1f  %12.2f  %5.1f%%\n",
          static_cast<long long>(row.bytes), row.copy_gbps, row.add_gbps,
          row.rmw_gbps, bound_s * 1e6, row.seconds * 1e6,
          traffic / row.seconds / 1e9, share * 100);
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

int main(int argc, char** argv) {
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
