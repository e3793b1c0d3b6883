// //train/examples:plot_metrics — draws the loss and accuracy curves of a
// --metrics file (JSON lines, train/loop/run_monitor.h) as an SVG.
//
//   bazel-bin/train/examples/digits_ddp --metrics=/tmp/m.jsonl
//   bazel-bin/train/examples/plot_metrics --metrics=/tmp/m.jsonl
//       --out=/tmp/m.svg      (one command; then open /tmp/m.svg in a browser)

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "base/input_file.h"
#include "base/run_paths.h"
#include "base/std_streams.h"
#include "train/examples/plot_metrics/metrics_plot.h"

ABSL_FLAG(std::string, metrics, "",
          "The metrics file an example wrote with --metrics (required).");
ABSL_FLAG(std::string, out, "",
          "Where to write the SVG (required); it is replaced.");
ABSL_FLAG(std::string, title, "", "The plot's title; default: the file name.");

namespace {

// main without the check of its own output.
int Run(int argc, char** argv) {
  if (std::optional<int> exit_code = tandem::HandleCommandLine(
          {.program = "plot_metrics",
           .summary = "Draws the loss and accuracy curves of an example's "
                      "--metrics file as an SVG.",
           .flag_folders = {"train/examples/plot_metrics/plot_metrics_main.cc"},
           .exit_codes = "Exit codes: 0 success, 1 unreadable, empty or "
                         "malformed metrics file, or non-finite step values "
                         "(the SVG is drawn without them), 2 usage error "
                         "(bad flag or value, --out equal to --metrics).",
           .help_epilogue = "Example: plot_metrics --metrics=m.jsonl "
                            "--out=m.svg"},
          argc, argv)) {
    return *exit_code;
  }
  const std::string metrics = absl::GetFlag(FLAGS_metrics);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (metrics.empty() || out.empty()) {
    std::fprintf(stderr,
                 "plot_metrics: --metrics and --out are required, e.g. "
                 "--metrics=m.jsonl --out=m.svg\n");
    return tandem::kExitUsageError;
  }
  // The SVG must not replace its own input (the same path or another name
  // of the same file, a folder holding it): base/run_paths.h.
  if (absl::Status s = tandem::base::CheckRunPaths(
          {{.flag = "--metrics", .path = metrics},
           {.flag = "--out",
            .path = out,
            .role = tandem::base::PathRole::kOutput}});
      !s.ok()) {
    std::fprintf(stderr, "plot_metrics: %s\n",
                 std::string(s.message()).c_str());
    return tandem::kExitUsageError;
  }
  // A regular file or a pipe, never a device, a directory or a FIFO nobody
  // writes; at most 1 GiB (a metrics file is a line per step).
  absl::StatusOr<std::string> text =
      tandem::ReadInputFile(metrics, {.max_bytes = int64_t{1} << 30});
  if (!text.ok()) {
    std::fprintf(stderr, "plot_metrics: --metrics=%s: %s\n", metrics.c_str(),
                 std::string(text.status().message()).c_str());
    return tandem::kExitRuntimeError;
  }
  absl::StatusOr<tandem::train::MetricsCurves> curves =
      tandem::train::ParseMetrics(*text);
  if (!curves.ok()) {
    std::fprintf(stderr, "plot_metrics: %s: %s\n", metrics.c_str(),
                 std::string(curves.status().message()).c_str());
    return tandem::kExitRuntimeError;
  }
  const std::string title =
      absl::GetFlag(FLAGS_title).empty() ? metrics : absl::GetFlag(FLAGS_title);
  std::ofstream svg(out, std::ios::trunc);
  svg << tandem::train::RenderSvg(*curves, title);
  svg.flush();
  if (!svg) {
    std::fprintf(stderr, "plot_metrics: cannot write --out=%s\n", out.c_str());
    return tandem::kExitRuntimeError;
  }
  if (curves->non_finite > 0) {
    // Drawn without them, but never silently: the run diverged.
    std::fprintf(stderr,
                 "plot_metrics: %s: %lld step value(s) were not finite (the "
                 "run wrote null; first at %s): %s is drawn without them\n",
                 metrics.c_str(), static_cast<long long>(curves->non_finite),
                 curves->first_non_finite.c_str(), out.c_str());
    return tandem::kExitRuntimeError;
  }
  std::printf("plot_metrics: %zu step(s), %zu epoch(s) -> %s\n",
              curves->step_loss.size(), curves->epoch_loss.size(), out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a file that could take a closed stream's number.
  if (std::optional<int> code =
          tandem::base::RefuseClosedStdStreams("plot_metrics")) {
    return *code;
  }
  // What it printed must have reached its reader (base/std_streams.h).
  return tandem::base::FinishStdStreams("plot_metrics", Run(argc, argv));
}
