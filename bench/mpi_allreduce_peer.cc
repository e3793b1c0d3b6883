// The OpenMPI peer of bench/comm_benchmark: plain MPI_Allreduce (blocking,
// MPI_SUM, float32) timed the way nccl-tests times, printing the same table.
// It is what a user of raw OpenMPI gets, to compare tandem's backends with.
//
//   mpirun --oversubscribe -np 2 bazel-bin/bench/mpi_allreduce_peer
//       --min_bytes=8 --max_bytes=268435456
//
// Each size: warm-up iterations, then `iters` back-to-back all-reduces
// between two barriers; the time of one operation is the slowest rank's
// elapsed time / iters (before the first size, --warmup_seconds of it
// untimed, as comm_benchmark does). The result is checked (every element must
// equal the exact sum) and wrong elements are counted in #wrong.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/flag_checks.h"
#include "bench/repeat_timer.h"
#include "comm/bandwidth.h"

ABSL_FLAG(int64_t, min_bytes, 8,
          "Smallest message, bytes (float32 elements x 4).");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20, "Largest message, bytes.");
ABSL_FLAG(double, target_seconds, 0.2,
          "Aim for about this much timed work per size (sets the iterations).");
ABSL_FLAG(double, warmup_seconds, 1,
          "Before the first size, run it untimed for this many seconds (0: "
          "none), as bench/comm_benchmark does.");

namespace {

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Seconds per all-reduce over `iters` iterations, the slowest rank's.
double TimeAllReduce(std::vector<float>& buf, int64_t count, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = Now();
  for (int i = 0; i < iters; ++i) {
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT,
                  MPI_SUM, MPI_COMM_WORLD);
  }
  double elapsed = (Now() - start) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return elapsed;
}

// Runs `count`-float all-reduces untimed for about `seconds`, in batches
// whose count every rank agrees on (the slowest rank's time decides).
void WarmUp(std::vector<float>& buf, int64_t count, double seconds) {
  if (seconds <= 0) return;
  const double probe = TimeAllReduce(buf, count, 2);
  const int iters = static_cast<int>(tandem::bench::WarmUpBatch(probe));
  for (double spent = 2 * probe; spent < seconds;) {
    spent += TimeAllReduce(buf, count, iters) * iters;
  }
}

}  // namespace

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  // Before MPI starts: every rank parses and checks the same flags and
  // exits 2 alike on a usage error.
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "mpi_allreduce_peer",
           .summary = "Times raw OpenMPI MPI_Allreduce (f32 sum) and prints "
                      "the nccl-tests table. Run under mpirun.",
           .flag_folders = {"bench/"}},
          argc, argv)) {
    return *exit_code;
  }
  absl::Status flags = tandem::bench::CheckSizeSweep(
      absl::GetFlag(FLAGS_min_bytes), absl::GetFlag(FLAGS_max_bytes), 1,
      absl::GetFlag(FLAGS_target_seconds));
  if (flags.ok()) {
    flags =
        tandem::bench::CheckWarmUpSeconds(absl::GetFlag(FLAGS_warmup_seconds));
  }
  if (flags.ok()) {  // MPI counts are int: at most 2^31 - 1 floats
    flags =
        tandem::bench::CheckInt("--max_bytes", absl::GetFlag(FLAGS_max_bytes),
                                4, int64_t{4} * INT32_MAX);
  }
  if (!flags.ok()) {
    std::fprintf(stderr, "mpi_allreduce_peer: %s\n",
                 std::string(flags.message()).c_str());
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  tandem::comm::BandwidthTable table(tandem::comm::OpKind::kAllReduce, size);
  if (rank == 0) {
    std::printf("# OpenMPI MPI_Allreduce, %d processes\n", size);
    std::fputs(table.Header().c_str(), stdout);
  }
  const int64_t max_count = absl::GetFlag(FLAGS_max_bytes) / 4;
  std::vector<float> buf(std::max<int64_t>(max_count, 1));
  bool warmed = false;
  for (int64_t bytes : tandem::bench::GeometricSizes(
           absl::GetFlag(FLAGS_min_bytes), absl::GetFlag(FLAGS_max_bytes), 2)) {
    const int64_t count = std::max<int64_t>(bytes / 4, 1);
    // Calibrate: a few iterations tell how many fit the target time.
    std::fill(buf.begin(), buf.begin() + count, 1.0f);
    if (!warmed) {
      warmed = true;
      WarmUp(buf, count, absl::GetFlag(FLAGS_warmup_seconds));
      std::fill(buf.begin(), buf.begin() + count, 1.0f);
    }
    double probe = TimeAllReduce(buf, count, 2);
    int iters = static_cast<int>(
        std::clamp(absl::GetFlag(FLAGS_target_seconds) / std::max(probe, 1e-9),
                   5.0, 100000.0));
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double seconds = TimeAllReduce(buf, count, iters);
    // Check with exact values: rank r contributes r + 1.
    std::fill(buf.begin(), buf.begin() + count, static_cast<float>(rank + 1));
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT,
                  MPI_SUM, MPI_COMM_WORLD);
    const float want = static_cast<float>(size) * (size + 1) / 2;
    int64_t wrong = std::count_if(buf.begin(), buf.begin() + count,
                                  [want](float v) { return v != want; });
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM,
                  MPI_COMM_WORLD);
    if (rank == 0) {
      std::fputs(table
                     .Row({.bytes = count * 4,
                           .count = count,
                           .dtype = tandem::comm::DType::kF32,
                           .redop = tandem::comm::ReduceOp::kSum,
                           .seconds = seconds,
                           .wrong = wrong})
                     .c_str(),
                 stdout);
      std::fflush(stdout);
    }
  }
  MPI_Finalize();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("mpi_allreduce_peer")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("mpi_allreduce_peer", Run(argc, argv));
}
