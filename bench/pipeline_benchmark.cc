// pipeline_benchmark: the rank pipeline's bubble and throughput on the
// simulated cluster's network clock (bench/pipeline_bubble.h).
//
//   ./bazelw run -c opt //bench:pipeline_benchmark
//   ./bazelw run -c opt //bench:pipeline_benchmark -- --part=bubble
//
// Part "bubble": GPipe and 1F1B at 2 and 4 stages, chunks 1..8, each stage
// charging 1 s per micro-batch forward and 2 s per backward on a network
// without latency: the measured idle fraction of the step against
// (p - 1) / (m + p - 1).
// Part "throughput": each stage a real MLP (--layers x Linear(--width) +
// ReLU), batch --batch, 1F1B, this host's thread CPU time charged as
// compute: simulated samples/s for chunks 1..8, the measured bubble
// (1 - the busiest stage's compute / step time) and the formula.
// Output: a table and one `RESULT key=value ...` line per case.
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/std_streams.h"
#include "bench/pipeline_bubble.h"

ABSL_FLAG(std::string, part, "bubble,throughput",
          "Comma-separated parts: bubble, throughput.");
ABSL_FLAG(int64_t, width, 512, "throughput: each Linear's width, 1..8192.");
ABSL_FLAG(int64_t, layers, 2, "throughput: Linear layers per stage, 1..64.");
ABSL_FLAG(int64_t, batch, 128, "throughput: batch rows, 8..65536.");
ABSL_FLAG(int64_t, steps, 2, "throughput: timed steps, 1..100.");

namespace tandem {
namespace {

using train::PipelineSchedule;
using train::PipelineScheduleName;

absl::Status RunBubble() {
  std::cout << "pipeline bubble, simulated clock (t_f = 1 s, t_b = 2 s per "
               "micro-batch and stage, no network latency)\n"
            << "schedule stages chunks   step_s  bubble  (p-1)/(m+p-1)\n";
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    for (int p : {2, 4}) {
      for (int64_t m = 1; m <= 8; ++m) {
        absl::StatusOr<bench::BubbleResult> r = bench::MeasureBubble(
            {.stages = p, .micro_batches = m, .schedule = schedule});
        if (!r.ok()) return r.status();
        std::cout << std::left << std::setw(9) << PipelineScheduleName(schedule)
                  << std::right << std::setw(6) << p << std::setw(7) << m
                  << std::fixed << std::setprecision(1) << std::setw(9)
                  << r->step_s << std::setprecision(4) << std::setw(8)
                  << r->bubble << std::setw(15) << r->predicted << "\n";
        std::cout << "RESULT part=bubble schedule="
                  << PipelineScheduleName(schedule) << " stages=" << p
                  << " chunks=" << m << " step_s=" << r->step_s
                  << " bubble=" << r->bubble << " predicted=" << r->predicted
                  << "\n";
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RunThroughput() {
  const int64_t width = absl::GetFlag(FLAGS_width);
  const int64_t layers = absl::GetFlag(FLAGS_layers);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  std::cout << "\npipeline throughput, 1f1b, MLP stages of " << layers
            << " x Linear(" << width << ") + ReLU, batch " << batch
            << ", this host's thread CPU time as compute\n"
            << "stages chunks  step_ms  samples/s  bubble  (p-1)/(m+p-1)\n";
  for (int p : {2, 4}) {
    for (int64_t m = 1; m <= 8; ++m) {
      absl::StatusOr<bench::ThroughputResult> r =
          bench::MeasureThroughput({.stages = p,
                                    .micro_batches = m,
                                    .batch = batch,
                                    .width = width,
                                    .layers_per_stage = layers,
                                    .steps = absl::GetFlag(FLAGS_steps)});
      if (!r.ok()) return r.status();
      std::cout << std::setw(6) << p << std::setw(7) << m << std::fixed
                << std::setprecision(2) << std::setw(9) << r->step_s * 1e3
                << std::setprecision(0) << std::setw(11) << r->samples_per_s
                << std::setprecision(4) << std::setw(8) << r->bubble
                << std::setw(15) << r->predicted << "\n";
      std::cout << "RESULT part=throughput stages=" << p << " chunks=" << m
                << " step_s=" << r->step_s
                << " samples_per_s=" << r->samples_per_s
                << " bubble=" << r->bubble << " predicted=" << r->predicted
                << "\n";
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tandem

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "pipeline_benchmark",
           .summary = "The rank pipeline's bubble (GPipe, 1F1B) and "
                      "throughput against (p-1)/(m+p-1), on the simulated "
                      "clock.",
           .flag_folders = {"bench/pipeline_benchmark"}},
          argc, argv)) {
    return *exit_code;
  }
  const int64_t width = absl::GetFlag(FLAGS_width);
  const int64_t layers = absl::GetFlag(FLAGS_layers);
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  if (width < 1 || width > 8192 || layers < 1 || layers > 64 || batch < 8 ||
      batch > 65536 || steps < 1 || steps > 100) {
    std::cerr << "pipeline_benchmark: --width must be in 1..8192, --layers "
                 "in 1..64, --batch in 8..65536, --steps in 1..100\n";
    return tandem::kExitUsageError;
  }
  for (absl::string_view part :
       absl::StrSplit(absl::GetFlag(FLAGS_part), ',')) {
    absl::Status s;
    if (part == "bubble") {
      s = tandem::RunBubble();
    } else if (part == "throughput") {
      s = tandem::RunThroughput();
    } else {
      std::cerr << "pipeline_benchmark: unknown --part '" << part
                << "' (bubble, throughput)\n";
      return tandem::kExitUsageError;
    }
    if (!s.ok()) {
      std::cerr << "pipeline_benchmark: " << s.message() << "\n";
      return tandem::kExitRuntimeError;
    }
  }
  return tandem::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("pipeline_benchmark")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("pipeline_benchmark", Run(argc, argv));
}
