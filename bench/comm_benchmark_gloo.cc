// comm_benchmark_gloo: the nccl-tests all-reduce table for tandem's gloo
// backend (comm::GlooCommunicator), one process per rank under tandemrun;
// the counterpart of //bench:comm_benchmark_mpi and of PyTorch's gloo
// (bench/peers/torch_allreduce.py), timed the same way
// (bench/allreduce_sweep.h) so the tables line up.
//
//   bazel-bin/train/launch/tandemrun --nproc_per_node=2 --master_port=0 --
//       bazel-bin/bench/comm_benchmark_gloo --min_bytes=8
//       --max_bytes=268435456
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/allreduce_sweep.h"
#include "bench/flag_checks.h"
#include "comm/fingerprint.h"
#include "comm/gloo/gloo_launcher.h"

ABSL_FLAG(int64_t, min_bytes, 8, "Smallest size S, bytes (f32 elements x 4).");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20, "Largest size S, bytes.");
ABSL_FLAG(double, target_seconds, 0.2,
          "Aim for about this much timed work per size (sets the iterations).");
ABSL_FLAG(double, warmup_seconds, 1,
          "Before the first size, run it untimed for this many seconds (0: "
          "none), as bench/comm_benchmark does.");

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "comm_benchmark_gloo",
           .summary =
               "Times tandem's gloo backend all-reduce (f32 sum) and prints "
               "the nccl-tests table. Run under tandemrun.",
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
  if (!flags.ok()) {
    std::fprintf(stderr, "comm_benchmark_gloo: %s\n",
                 std::string(flags.message()).c_str());
    return 2;
  }
  tandem::comm::GlooLauncher launcher;
  tandem::bench::AllReduceSweep sweep;
  sweep.min_bytes = absl::GetFlag(FLAGS_min_bytes);
  sweep.max_bytes = absl::GetFlag(FLAGS_max_bytes);
  sweep.target_seconds = absl::GetFlag(FLAGS_target_seconds);
  sweep.warmup_seconds = absl::GetFlag(FLAGS_warmup_seconds);
  const char* world = std::getenv("WORLD_SIZE");
  const int n = world != nullptr ? std::atoi(world) : 1;
  sweep.title = absl::StrCat("# tandem GlooCommunicator AllReduce, ", n,
                             " processes, f32, sum, collective check ",
                             tandem::comm::CollectiveCheckRequested(true)
                                 ? "on (TANDEM_DISTRIBUTED_DEBUG=OFF: off)"
                                 : "off");
  if (absl::Status s = launcher.CanRun(n); !s.ok()) {
    std::fprintf(stderr, "comm_benchmark_gloo: %s\n", s.ToString().c_str());
    return 2;
  }
  std::vector<tandem::comm::RankStatus> statuses =
      launcher.Run(n, [&sweep](int, tandem::comm::Communicator& comm) {
        return tandem::bench::RunAllReduceSweep(comm, sweep);
      });
  launcher.Shutdown();
  if (!statuses[0].status.ok()) {
    std::fprintf(stderr, "comm_benchmark_gloo on rank %d: %s\n",
                 statuses[0].rank, statuses[0].status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("comm_benchmark_gloo")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("comm_benchmark_gloo", Run(argc, argv));
}
