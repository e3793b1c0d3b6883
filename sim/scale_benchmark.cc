// scale_benchmark: how the simulated cluster scales with the world size.
// For each world size: the wall time of starting and joining the ranks (an
// empty run), and the time of one 4 KiB f32 sum all-reduce (the slowest
// rank's elapsed over --iters back-to-back all-reduces after one warm-up,
// checked for the exact sum), with every check on (fingerprints, timeouts,
// overlap checks) and the process CPU time per all-reduce, for each way of
// running ranks in --ranks (OS threads, user-space fibers:
// sim::Options::ranks). Peak RSS of the process is printed at the end (it only
// grows, so run one world size per process for per-size memory).
//
//   ./bazelw run -c opt //sim:scale_benchmark -- --world_sizes=64,1024,8192
//   ./bazelw run -c opt //sim:scale_benchmark -- --world_sizes=8192
//       --ranks=fibers
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/command_line.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "sim/sim.h"

ABSL_FLAG(std::string, world_sizes, "8,64,256,1024",
          "Comma-separated world sizes.");
ABSL_FLAG(int64_t, iters, 20, "All-reduces timed per world size.");
ABSL_FLAG(int64_t, bytes, 4096, "Bytes per rank of each all-reduce.");
ABSL_FLAG(std::string, ranks, "threads,fibers",
          "Comma-separated ways of running ranks: threads (one OS thread per "
          "rank), fibers (user-space fibers on one worker per core).");
ABSL_FLAG(int, fiber_workers, 0,
          "Worker threads of --ranks=fibers; 0: one per hardware thread.");
ABSL_FLAG(double, spin_us, -1,
          "sim::Options::spin in microseconds; negative keeps the default. "
          "0 under valgrind --tool=callgrind, which runs one thread at a "
          "time: a spinning rank would only count its own spin.");

namespace {

// CPU seconds of the whole process (every thread), user + system.
double ProcessCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  const tandem::CommandLine command_line = {
      .program = "scale_benchmark",
      .summary =
          "times an empty run and a small all-reduce on the simulated "
          "cluster at each world size.",
      .flag_folders = {"sim/"}};
  if (std::optional<int> code =
          tandem::HandleCommandLine(command_line, argc, argv)) {
    return *code;
  }
  std::vector<int> sizes;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_world_sizes), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1) {
      std::fprintf(stderr, "scale_benchmark: bad --world_sizes entry '%s'\n",
                   std::string(s).c_str());
      return tandem::kExitUsageError;
    }
    sizes.push_back(n);
  }
  std::vector<tandem::sim::RankExecution> modes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_ranks), ',')) {
    if (s == "threads") {
      modes.push_back(tandem::sim::RankExecution::kThreads);
    } else if (s == "fibers") {
      modes.push_back(tandem::sim::RankExecution::kFibers);
    } else {
      std::fprintf(stderr,
                   "scale_benchmark: bad --ranks entry '%s'; expected "
                   "threads or fibers\n",
                   std::string(s).c_str());
      return tandem::kExitUsageError;
    }
  }
  const int64_t iters = std::max<int64_t>(1, absl::GetFlag(FLAGS_iters));
  const int64_t count = std::max<int64_t>(1, absl::GetFlag(FLAGS_bytes) / 4);
  // allreduce_us: wall time per all-reduce (the slowest rank's);
  // cpu_us: CPU time of the whole process per all-reduce (every core), the
  // figure that does not depend on what else the machine runs.
  std::printf("%8s %8s %14s %16s %12s %8s\n", "mode", "ranks", "empty_run_ms",
              "allreduce_us", "cpu_us", "wrong");
  for (tandem::sim::RankExecution mode : modes)
    for (int n : sizes) {
      tandem::sim::Options options;
      options.ranks = mode;
      options.fiber_workers = absl::GetFlag(FLAGS_fiber_workers);
      if (absl::GetFlag(FLAGS_spin_us) >= 0) {
        options.spin = absl::Microseconds(absl::GetFlag(FLAGS_spin_us));
      }
      const char* mode_name =
          mode == tandem::sim::RankExecution::kFibers ? "fibers" : "threads";
      const double t0 = Now();
      tandem::sim::RunResult empty = tandem::sim::Run(
          n, [](int, tandem::comm::Communicator&) { return absl::OkStatus(); },
          options);
      const double empty_s = Now() - t0;
      if (!empty.ok()) {
        std::fprintf(stderr, "scale_benchmark: %s\n",
                     empty.status().ToString().c_str());
        return tandem::kExitRuntimeError;
      }
      std::vector<double> elapsed(n, 0);
      std::vector<double> cpu_end(n, 0);
      double cpu_start = 0;
      std::vector<int64_t> wrong(n, 0);
      tandem::sim::RunResult run = tandem::sim::Run(
          n,
          [&](int rank, tandem::comm::Communicator& comm) -> absl::Status {
            std::vector<float> v(count);
            auto view = tandem::comm::HostView(absl::MakeSpan(v));
            // Warm-up (and the exact-result check: sum of 1 over n ranks).
            std::fill(v.begin(), v.end(), 1.0f);
            if (absl::Status s =
                    comm.AllReduce(view, tandem::comm::ReduceOp::kSum)->Wait();
                !s.ok()) {
              return s;
            }
            for (float x : v) wrong[rank] += x != static_cast<float>(n);
            if (absl::Status s = comm.Barrier(); !s.ok()) return s;
            const double start = Now();
            if (rank == 0) cpu_start = ProcessCpu();
            for (int64_t i = 0; i < iters; ++i) {
              if (absl::Status s =
                      comm.AllReduce(view, tandem::comm::ReduceOp::kMax)
                          ->Wait();
                  !s.ok()) {
                return s;
              }
            }
            elapsed[rank] = Now() - start;
            cpu_end[rank] = ProcessCpu();
            return absl::OkStatus();
          },
          options);
      if (!run.ok()) {
        std::fprintf(stderr, "scale_benchmark: %s\n",
                     run.status().ToString().c_str());
        return tandem::kExitRuntimeError;
      }
      int64_t total_wrong = 0;
      for (int64_t w : wrong) total_wrong += w;
      const double slowest = *std::max_element(elapsed.begin(), elapsed.end());
      const double cpu =
          *std::max_element(cpu_end.begin(), cpu_end.end()) - cpu_start;
      std::printf("%8s %8d %14.2f %16.1f %12.1f %8lld\n", mode_name, n,
                  empty_s * 1e3, slowest / iters * 1e6, cpu / iters * 1e6,
                  static_cast<long long>(total_wrong));
      std::fflush(stdout);
    }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS: %.1f MB\n", usage.ru_maxrss / 1024.0);
  return tandem::kExitOk;
}
