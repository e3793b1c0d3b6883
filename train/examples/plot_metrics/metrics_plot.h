// Reads a --metrics file (train/loop/run_monitor.h: one JSON object per
// line) and draws its loss and accuracy curves as an SVG a browser opens.
//
//   absl::StatusOr<MetricsCurves> curves = ParseMetrics(text);
//   std::string svg = RenderSvg(*curves, "digits_ddp");
//
// The SVG has two panels over the global step: "loss" (every step's loss as
// a thin line, each epoch's mean training loss as dots joined by a line) and
// "accuracy" (each epoch's training accuracy; the test accuracy, if the file
// has one, as a dot at the last step). Axes have round ticks; an empty curve
// leaves its panel with a "no data" note.
#ifndef TANDEM_TRAIN_EXAMPLES_PLOT_METRICS_METRICS_PLOT_H_
#define TANDEM_TRAIN_EXAMPLES_PLOT_METRICS_METRICS_PLOT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem::train {

// (x, y) points, x ascending.
using Curve = std::vector<std::pair<double, double>>;

struct MetricsCurves {
  Curve step_loss;       // (global_step, loss)
  Curve epoch_loss;      // (global step at the epoch's end, train_loss)
  Curve epoch_accuracy;  // (same, train_accuracy)
  Curve test_accuracy;   // at most one point: (last global step, accuracy)
  // Step values the run wrote as null (non-finite: a diverged loss) leave
  // no point; how many, and the first ("line 5: \"loss\" is null"). (A null
  // in an epoch or test line means "not measured": no point, not counted.)
  int64_t non_finite = 0;
  std::string first_non_finite;
};

// One flat JSON object ({"key": number | "string" | null | true | false,
// ...}): numbers by key (null becomes NaN, true/false 1/0); strings in
// `strings` when given. InvalidArgument saying what was expected where.
absl::StatusOr<std::map<std::string, double>> ParseFlatJsonObject(
    std::string_view text, std::map<std::string, std::string>* strings);

// Every line of a metrics file (blank lines skipped; a line of another kind
// ignored). InvalidArgument naming the line number of a line that is not a
// JSON object, lacks "kind", lacks a value its kind needs ("loss" of a step)
// or holds one that is not a number ("loss": "abc"); InvalidArgument for a
// text with no step, epoch or test line at all (an empty file). Non-finite
// values (null) leave no point; a step's are counted in `non_finite`.
absl::StatusOr<MetricsCurves> ParseMetrics(std::string_view text);

// The SVG document (900 x 380 px) of `curves` titled `title`.
std::string RenderSvg(const MetricsCurves& curves, const std::string& title);

// Round tick values covering [lo, hi]: about `target` of them, steps of
// 1, 2 or 5 times a power of ten.
std::vector<double> NiceTicks(double lo, double hi, int target);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_EXAMPLES_PLOT_METRICS_METRICS_PLOT_H_
