// What a training run shows while it runs and leaves behind: rank 0's
// progress line and the metrics file (--progress, --metrics of the examples'
// runner, train/examples/runner/example_main.h).
//
//   RunMonitor* monitor = ActiveRunMonitor();   // set by ExampleMain
//   if (monitor != nullptr && comm.rank() == 0) {
//     monitor->Step({.epoch = e, .epochs = n, .step = b, .steps_per_epoch = m,
//                    .samples = global_batch, .loss = loss});
//   }
//
// Progress (ProgressMode):
//   kAuto  on a terminal one line, redrawn in place at most every
//          redraw_interval: "name: epoch 3/20 step 12/23 | 5120 samples/s |
//          loss 0.2345 | ETA 0:00:12"; otherwise (a log file, a pipe) the same
//          text as a plain line every plain_interval, so logs stay readable
//          (a run shorter than that prints none). On a terminal the last
//          step always shows.
//   kPlain plain periodic lines even on a terminal.
//   kOff   nothing.
// Samples/s is measured over the interval since the previous line; the ETA
// is the remaining steps at the mean step time so far.
//
// Metrics (`metrics_path`): one JSON object per line, flushed as written:
//   {"kind":"step","epoch":1,"step":1,"global_step":1,"samples":64,
//    "loss":2.3,"step_s":0.001,"samples_per_s":64000,"comm_s":0.0002,
//    "wait_s":0.0001,"scale":65536,"skipped":false,"time_s":0.01}
//                          (comm_s, wait_s, scale and skipped when reported)
//   {"kind":"epoch","epoch":1,"train_loss":1.7,"train_accuracy":0.61,
//    "samples":1438,"epoch_s":0.3,"samples_per_s":4793,"time_s":0.3}
//   {"kind":"test","test_accuracy":0.86,"correct":310,"total":359,
//    "time_s":0.31}
// epoch and step count from 1, as the examples print them; time_s is the
// seconds since the monitor was created. //train/examples:plot_metrics draws
// the file (train/examples/plot_metrics/metrics_plot.h).
//
// Thread safety: every method may be called from any thread (a mutex);
// the examples call it from rank 0 only.
#ifndef TANDEM_TRAIN_LOOP_RUN_MONITOR_H_
#define TANDEM_TRAIN_LOOP_RUN_MONITOR_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {

enum class ProgressMode { kAuto, kPlain, kOff };

// "auto", "plain" or "off"; InvalidArgument naming the choices otherwise.
absl::StatusOr<ProgressMode> ParseProgressMode(const std::string& text);

struct MonitorOptions {
  std::string name;  // the first word of every progress line ("digits_ddp")
  ProgressMode progress = ProgressMode::kAuto;
  std::FILE* out = stdout;  // where progress goes; not owned
  bool terminal = false;    // `out` is a terminal (the runner asks isatty)
  absl::Duration redraw_interval = absl::Milliseconds(200);
  absl::Duration plain_interval = absl::Seconds(10);
  std::string metrics_path;  // empty: no metrics file
  // The clock (tests pass a fake one).
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

struct StepReport {
  int64_t epoch = 0;  // 0-based; shown and written 1-based
  int64_t epochs = 0;
  int64_t step = 0;  // 0-based within the epoch
  int64_t steps_per_epoch = 0;
  int64_t samples = 0;  // over every rank, this step
  double loss = kUnknown;
  // This rank's gradient all-reduces this step, launch to completion
  // (DistributedDataParallel::SyncStats::all_reduce_seconds), and the part
  // the step waited for (wait_seconds): "comm_s" and "wait_s".
  double comm_seconds = kUnknown;
  double wait_seconds = kUnknown;
  // Mixed precision: the GradScaler's scale this step's loss was multiplied
  // by, and whether the scaler skipped the optimizer step (an inf/NaN
  // gradient): "scale" and "skipped", written when loss_scale is known.
  double loss_scale = kUnknown;
  bool skipped = false;
};

struct EpochReport {
  int64_t epoch = 0;  // 0-based
  int64_t epochs = 0;
  double train_loss = kUnknown;
  double train_accuracy = kUnknown;
  int64_t samples = 0;  // over every rank, this epoch
};

class RunMonitor {
 public:
  // The metrics file is created at the first line written (so that, under
  // mpirun, only rank 0's process creates it); a failure to create or write
  // it comes back from Finish().
  explicit RunMonitor(MonitorOptions options);
  ~RunMonitor();
  RunMonitor(const RunMonitor&) = delete;
  RunMonitor& operator=(const RunMonitor&) = delete;

  void Step(const StepReport& report);
  // Also ends a redrawn line, so that what the example prints next starts
  // on a line of its own.
  void Epoch(const EpochReport& report);
  void Test(double accuracy, int64_t correct, int64_t total);
  // Before the caller prints a line of its own to `out`: ends a redrawn
  // progress line (the next Step redraws it below).
  void BreakLine();
  // Ends the progress line and closes the metrics file; DataLoss naming the
  // file and the reason for the first failure to create or write it.
  // Idempotent; nothing is written after it.
  absl::Status Finish();

 private:
  void WriteMetrics(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BreakLineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double Seconds(absl::Time t) const;

  const MonitorOptions options_;
  std::mutex mu_;
  std::FILE* metrics_ ABSL_GUARDED_BY(mu_) = nullptr;
  int write_error_ ABSL_GUARDED_BY(mu_) = 0;  // errno of the first failure
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  const absl::Time created_;
  absl::Time first_step_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_step_ ABSL_GUARDED_BY(mu_);
  absl::Time epoch_start_ ABSL_GUARDED_BY(mu_);
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  // The previous progress line: when, and the samples then.
  absl::Time last_line_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t last_line_samples_ ABSL_GUARDED_BY(mu_) = 0;
  bool line_open_ ABSL_GUARDED_BY(mu_) = false;  // a redrawn line is showing
};

// `report` with this step's gradient all-reduce figures taken from `ddp`
// (DistributedDataParallel::last_sync_stats(): comm_s, wait_s), or 0 for
// both without DDP (nullptr: no gradient all-reduce).
StepReport WithCommTimes(const DistributedDataParallel* ddp, StepReport report);

// The runner's monitor of this process (nullptr when none: a library user
// calling the example directly, or a rank other than rank 0's process).
RunMonitor* ActiveRunMonitor();

// Makes `monitor` the active one for its lifetime (the runner).
class ScopedActiveRunMonitor {
 public:
  explicit ScopedActiveRunMonitor(RunMonitor* monitor);
  ~ScopedActiveRunMonitor();
  ScopedActiveRunMonitor(const ScopedActiveRunMonitor&) = delete;
  ScopedActiveRunMonitor& operator=(const ScopedActiveRunMonitor&) = delete;

 private:
  RunMonitor* previous_;
};

// "0:00:12", "1:02:03", "3d 1:02:03"; "?" for a negative or non-finite
// number of seconds.
std::string FormatEta(double seconds);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_LOOP_RUN_MONITOR_H_
