#include "train/loop/run_monitor.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tandem::train {
namespace {

std::atomic<RunMonitor*> g_active{nullptr};

// A JSON number, or null for NaN/inf (JSON has neither).
std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.9g", v);
}

}  // namespace

absl::StatusOr<ProgressMode> ParseProgressMode(const std::string& text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "plain") return ProgressMode::kPlain;
  if (text == "off") return ProgressMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("--progress=", text,
                   "; expected auto (a line redrawn on a terminal, periodic "
                   "lines otherwise), plain or off"));
}

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  const int64_t days = s / 86400;
  const std::string hms =
      absl::StrFormat("%d:%02d:%02d", s % 86400 / 3600, s % 3600 / 60, s % 60);
  return days > 0 ? absl::StrCat(days, "d ", hms) : hms;
}

RunMonitor::RunMonitor(MonitorOptions options)
    : options_(std::move(options)),
      created_(options_.clock()),
      last_step_(created_),
      epoch_start_(created_) {}

RunMonitor::~RunMonitor() { Finish().IgnoreError(); }

double RunMonitor::Seconds(absl::Time t) const {
  return absl::ToDoubleSeconds(t - created_);
}

void RunMonitor::WriteMetrics(const std::string& line) {
  if (options_.metrics_path.empty() || finished_ || write_error_ != 0) return;
  if (metrics_ == nullptr) {
    metrics_ = std::fopen(options_.metrics_path.c_str(), "w");
    if (metrics_ == nullptr) {
      write_error_ = errno;
      return;
    }
  }
  if (std::fputs(line.c_str(), metrics_) < 0 ||
      std::fputc('\n', metrics_) < 0 || std::fflush(metrics_) != 0) {
    write_error_ = errno != 0 ? errno : EIO;
  }
}

void RunMonitor::BreakLineLocked() {
  if (!line_open_) return;
  std::fputc('\n', options_.out);
  std::fflush(options_.out);
  line_open_ = false;
}

void RunMonitor::BreakLine() {
  std::lock_guard<std::mutex> lock(mu_);
  BreakLineLocked();
}

void RunMonitor::Step(const StepReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = options_.clock();
  if (first_step_ == absl::InfinitePast()) {
    // Setup (loading, building the model) is not training time.
    first_step_ = last_step_;
    last_line_ = last_step_;
  }
  const double step_s = absl::ToDoubleSeconds(now - last_step_);
  last_step_ = now;
  ++global_step_;
  samples_ += r.samples;
  std::string line =
      absl::StrCat("{\"kind\":\"step\",\"epoch\":", r.epoch + 1,
                   ",\"step\":", r.step + 1, ",\"global_step\":", global_step_,
                   ",\"samples\":", r.samples, ",\"loss\":", Number(r.loss),
                   ",\"step_s\":", Number(step_s), ",\"samples_per_s\":",
                   Number(step_s > 0 ? r.samples / step_s : kUnknown));
  if (std::isfinite(r.comm_seconds)) {
    absl::StrAppend(&line, ",\"comm_s\":", Number(r.comm_seconds));
  }
  if (std::isfinite(r.wait_seconds)) {
    absl::StrAppend(&line, ",\"wait_s\":", Number(r.wait_seconds));
  }
  if (std::isfinite(r.loss_scale)) {
    absl::StrAppend(&line, ",\"scale\":", Number(r.loss_scale),
                    ",\"skipped\":", r.skipped ? "true" : "false");
  }
  absl::StrAppend(&line, ",\"time_s\":", Number(Seconds(now)), "}");
  WriteMetrics(line);

  if (options_.progress == ProgressMode::kOff) return;
  const bool redraw =
      options_.progress == ProgressMode::kAuto && options_.terminal;
  const bool last = r.epoch + 1 == r.epochs && r.step + 1 == r.steps_per_epoch;
  const absl::Duration interval =
      redraw ? options_.redraw_interval : options_.plain_interval;
  // On a terminal the last step always shows (the line's final state); in
  // a log, runs shorter than the interval add no line at all.
  if (now - last_line_ < interval && !(redraw && last)) return;
  const double window = absl::ToDoubleSeconds(now - last_line_);
  const double rate =
      window > 0 ? (samples_ - last_line_samples_) / window : kUnknown;
  const int64_t total_steps = r.epochs * r.steps_per_epoch;
  const int64_t done = r.epoch * r.steps_per_epoch + r.step + 1;
  const double mean_step =
      absl::ToDoubleSeconds(now - first_step_) / static_cast<double>(done);
  std::string text = absl::StrFormat(
      "%s: epoch %d/%d step %d/%d | %s samples/s | loss %.4f | ETA %s",
      options_.name, r.epoch + 1, r.epochs, r.step + 1, r.steps_per_epoch,
      std::isfinite(rate) ? absl::StrFormat("%.0f", rate) : "?", r.loss,
      FormatEta(mean_step * static_cast<double>(total_steps - done)));
  if (std::isfinite(r.loss_scale)) {
    absl::StrAppend(&text, absl::StrFormat(" | scale %g", r.loss_scale));
  }
  if (redraw) {
    // Back to the line's start, the text, then clear what a longer previous
    // line left.
    std::fprintf(options_.out, "\r%s\x1b[K", text.c_str());
    line_open_ = true;
  } else {
    std::fprintf(options_.out, "%s\n", text.c_str());
  }
  std::fflush(options_.out);
  last_line_ = now;
  last_line_samples_ = samples_;
}

void RunMonitor::Epoch(const EpochReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  BreakLineLocked();
  const absl::Time now = options_.clock();
  const double epoch_s = absl::ToDoubleSeconds(now - epoch_start_);
  epoch_start_ = now;
  WriteMetrics(absl::StrCat(
      "{\"kind\":\"epoch\",\"epoch\":", r.epoch + 1, ",\"train_loss\":",
      Number(r.train_loss), ",\"train_accuracy\":", Number(r.train_accuracy),
      ",\"samples\":", r.samples, ",\"epoch_s\":", Number(epoch_s),
      ",\"samples_per_s\":",
      Number(epoch_s > 0 ? r.samples / epoch_s : kUnknown),
      ",\"time_s\":", Number(Seconds(now)), "}"));
}

void RunMonitor::Test(double accuracy, int64_t correct, int64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  BreakLineLocked();
  WriteMetrics(
      absl::StrCat("{\"kind\":\"test\",\"test_accuracy\":", Number(accuracy),
                   ",\"correct\":", correct, ",\"total\":", total,
                   ",\"time_s\":", Number(Seconds(options_.clock())), "}"));
}

absl::Status RunMonitor::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  BreakLineLocked();
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (metrics_ != nullptr) {
    if (std::fclose(metrics_) != 0 && write_error_ == 0) write_error_ = errno;
    metrics_ = nullptr;
  }
  if (write_error_ != 0) {
    return absl::DataLossError(absl::StrCat(
        "--metrics=", options_.metrics_path, ": writing the file failed (",
        std::strerror(write_error_),
        "); check that its folder exists, is writable and has space"));
  }
  return absl::OkStatus();
}

StepReport WithCommTimes(const DistributedDataParallel* ddp,
                         StepReport report) {
  report.comm_seconds =
      ddp != nullptr ? ddp->last_sync_stats().all_reduce_seconds : 0.0;
  report.wait_seconds =
      ddp != nullptr ? ddp->last_sync_stats().wait_seconds : 0.0;
  return report;
}

RunMonitor* ActiveRunMonitor() {
  return g_active.load(std::memory_order_acquire);
}

ScopedActiveRunMonitor::ScopedActiveRunMonitor(RunMonitor* monitor)
    : previous_(g_active.exchange(monitor, std::memory_order_acq_rel)) {}

ScopedActiveRunMonitor::~ScopedActiveRunMonitor() {
  g_active.store(previous_, std::memory_order_release);
}

}  // namespace tandem::train
