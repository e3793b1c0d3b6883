#include "train/examples/plot_metrics/metrics_plot.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace tandem::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A cursor over one JSON object's text.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool EatWord(std::string_view w) {
    SkipSpace();
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  absl::StatusOr<std::string> String() {
    if (!Eat('"')) return Error("a string");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        const char e = text_[pos_++];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
      out += c;
    }
    if (!Eat('"')) return Error("the closing quote of a string");
    return out;
  }
  absl::StatusOr<double> Number() {
    SkipSpace();
    const std::string rest(text_.substr(pos_, 64));
    char* end = nullptr;
    const double v = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) return Error("a number");
    pos_ += static_cast<size_t>(end - rest.c_str());
    return v;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", std::string(what), " at character ", pos_ + 1,
                     " of '", std::string(text_), "'"));
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// The panel geometry: where data coordinates land on the page.
struct Panel {
  double left, top, width, height;
  double x0, x1, y0, y1;  // data ranges
  double X(double x) const {
    return left + (x1 == x0 ? 0.5 : (x - x0) / (x1 - x0)) * width;
  }
  double Y(double y) const {
    return top + height - (y1 == y0 ? 0.5 : (y - y0) / (y1 - y0)) * height;
  }
};

std::string Fmt(double v) { return absl::StrFormat("%.1f", v); }

std::string TickLabel(double v) {
  if (v == 0) return "0";
  return absl::StrFormat("%g", v);
}

std::string Escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Polyline(const Panel& p, const Curve& c, const std::string& color,
                     double width) {
  if (c.size() < 2) return "";
  std::string points;
  for (const auto& [x, y] : c) {
    absl::StrAppend(&points, points.empty() ? "" : " ", Fmt(p.X(x)), ",",
                    Fmt(p.Y(y)));
  }
  return absl::StrCat("<polyline fill=\"none\" stroke=\"", color,
                      "\" stroke-width=\"", width, "\" points=\"", points,
                      "\"/>\n");
}

std::string Dots(const Panel& p, const Curve& c, const std::string& color) {
  std::string out;
  for (const auto& [x, y] : c) {
    absl::StrAppend(&out, "<circle cx=\"", Fmt(p.X(x)), "\" cy=\"", Fmt(p.Y(y)),
                    "\" r=\"3\" fill=\"", color, "\"/>\n");
  }
  return out;
}

struct Series {
  const Curve* curve;
  std::string color;
  std::string label;
  bool line;
  bool dots;
  double width;
};

// One panel: frame, ticks and labels, the series, a legend.
std::string DrawPanel(double left, const std::string& title,
                      const std::vector<Series>& series, bool zero_to_one) {
  constexpr double kTop = 50, kWidth = 360, kHeight = 260;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0,
         y1 = -x0;
  for (const Series& s : series) {
    for (const auto& [x, y] : *s.curve) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  std::string out = absl::StrCat(
      "<text x=\"", Fmt(left + kWidth / 2), "\" y=\"", Fmt(kTop - 12),
      "\" text-anchor=\"middle\" font-size=\"14\">", Escape(title),
      "</text>\n<rect x=\"", Fmt(left), "\" y=\"", Fmt(kTop), "\" width=\"",
      Fmt(kWidth), "\" height=\"", Fmt(kHeight),
      "\" fill=\"none\" stroke=\"#444\"/>\n");
  if (!std::isfinite(x0)) {
    absl::StrAppend(&out, "<text x=\"", Fmt(left + kWidth / 2), "\" y=\"",
                    Fmt(kTop + kHeight / 2),
                    "\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n");
    return out;
  }
  if (zero_to_one) {
    y0 = std::min(y0, 0.0);
    y1 = std::max(y1, 1.0);
  } else {
    y0 = std::min(y0, 0.0);
  }
  const std::vector<double> xt = NiceTicks(x0, x1, 6);
  const std::vector<double> yt = NiceTicks(y0, y1, 5);
  Panel p{left,
          kTop,
          kWidth,
          kHeight,
          std::min(x0, xt.front()),
          std::max(x1, xt.back()),
          std::min(y0, yt.front()),
          std::max(y1, yt.back())};
  for (const double t : xt) {
    absl::StrAppend(
        &out, "<line x1=\"", Fmt(p.X(t)), "\" y1=\"", Fmt(kTop + kHeight),
        "\" x2=\"", Fmt(p.X(t)), "\" y2=\"", Fmt(kTop + kHeight + 5),
        "\" stroke=\"#444\"/>\n", "<text x=\"", Fmt(p.X(t)), "\" y=\"",
        Fmt(kTop + kHeight + 18), "\" text-anchor=\"middle\" font-size=\"11\">",
        TickLabel(t), "</text>\n");
  }
  for (const double t : yt) {
    absl::StrAppend(
        &out, "<line x1=\"", Fmt(left), "\" y1=\"", Fmt(p.Y(t)), "\" x2=\"",
        Fmt(left + kWidth), "\" y2=\"", Fmt(p.Y(t)), "\" stroke=\"#ddd\"/>\n",
        "<text x=\"", Fmt(left - 6), "\" y=\"", Fmt(p.Y(t) + 4),
        "\" text-anchor=\"end\" font-size=\"11\">", TickLabel(t), "</text>\n");
  }
  absl::StrAppend(&out, "<text x=\"", Fmt(left + kWidth / 2), "\" y=\"",
                  Fmt(kTop + kHeight + 36),
                  "\" text-anchor=\"middle\" font-size=\"12\">step</text>\n");
  double legend_y = kTop + 14;
  for (const Series& s : series) {
    if (s.line) absl::StrAppend(&out, Polyline(p, *s.curve, s.color, s.width));
    if (s.dots) absl::StrAppend(&out, Dots(p, *s.curve, s.color));
    if (s.curve->empty()) continue;
    absl::StrAppend(&out, "<rect x=\"", Fmt(left + kWidth - 150), "\" y=\"",
                    Fmt(legend_y - 8), "\" width=\"10\" height=\"10\" fill=\"",
                    s.color, "\"/>\n<text x=\"", Fmt(left + kWidth - 135),
                    "\" y=\"", Fmt(legend_y + 1), "\" font-size=\"11\">",
                    Escape(s.label), "</text>\n");
    legend_y += 16;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, double>> ParseFlatJsonObject(
    std::string_view text, std::map<std::string, std::string>* strings) {
  Reader r(text);
  std::map<std::string, double> numbers;
  if (!r.Eat('{')) return r.Error("'{'");
  if (!r.Eat('}')) {
    do {
      absl::StatusOr<std::string> key = r.String();
      if (!key.ok()) return key.status();
      if (!r.Eat(':')) return r.Error("':'");
      if (r.Peek('"')) {
        absl::StatusOr<std::string> value = r.String();
        if (!value.ok()) return value.status();
        if (strings != nullptr) (*strings)[*key] = *value;
      } else if (r.EatWord("null")) {
        numbers[*key] = kNaN;
      } else if (r.EatWord("true")) {
        numbers[*key] = 1;
      } else if (r.EatWord("false")) {
        numbers[*key] = 0;
      } else {
        absl::StatusOr<double> value = r.Number();
        if (!value.ok()) return value.status();
        numbers[*key] = *value;
      }
    } while (r.Eat(','));
    if (!r.Eat('}')) return r.Error("',' or '}'");
  }
  if (!r.AtEnd()) return r.Error("the end of the line after '}'");
  return numbers;
}

absl::StatusOr<MetricsCurves> ParseMetrics(std::string_view text) {
  MetricsCurves curves;
  double last_step = 0;
  int64_t line_number = 0;
  int64_t kept_lines = 0;
  // Debian's Abseil has its own string_view: convert at the boundary.
  for (const absl::string_view piece :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    const std::string_view line(piece.data(), piece.size());
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::map<std::string, std::string> strings;
    absl::StatusOr<std::map<std::string, double>> v =
        ParseFlatJsonObject(line, &strings);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": ", v.status().message(),
                       "; expected the JSON lines --metrics writes"));
    }
    auto kind = strings.find("kind");
    if (kind == strings.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number,
                       ": no \"kind\"; expected the JSON lines --metrics "
                       "writes (kind step, epoch or test)"));
    }
    // The number under `key`: an error when it is missing or not a number;
    // NaN when the run wrote null (counted for a step's values, which every
    // step measures; an epoch's or test's null means "not measured").
    auto get = [&](const char* key) -> absl::StatusOr<double> {
      if (auto s = strings.find(key); s != strings.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", line_number, ": \"", key, "\" is \"", s->second,
            "\", not a number; expected the JSON lines --metrics writes"));
      }
      auto it = v->find(key);
      if (it == v->end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", line_number, ": a ", kind->second, " line without \"", key,
            "\"; expected the JSON lines --metrics writes"));
      }
      if (kind->second == "step" && !std::isfinite(it->second) &&
          curves.non_finite++ == 0) {
        curves.first_non_finite =
            absl::StrCat("line ", line_number, ": \"", key, "\" is null");
      }
      return it->second;
    };
    auto add = [](Curve& c, double x, double y) {
      if (std::isfinite(x) && std::isfinite(y)) c.push_back({x, y});
    };
    if (kind->second == "step") {
      TANDEM_ASSIGN_OR_RETURN(last_step, get("global_step"));
      TANDEM_ASSIGN_OR_RETURN(const double loss, get("loss"));
      add(curves.step_loss, last_step, loss);
    } else if (kind->second == "epoch") {
      TANDEM_ASSIGN_OR_RETURN(const double loss, get("train_loss"));
      TANDEM_ASSIGN_OR_RETURN(const double accuracy, get("train_accuracy"));
      add(curves.epoch_loss, last_step, loss);
      add(curves.epoch_accuracy, last_step, accuracy);
    } else if (kind->second == "test") {
      TANDEM_ASSIGN_OR_RETURN(const double accuracy, get("test_accuracy"));
      curves.test_accuracy.clear();
      add(curves.test_accuracy, last_step, accuracy);
    } else {
      continue;
    }
    ++kept_lines;
  }
  if (kept_lines == 0) {
    const bool blank =
        text.find_first_not_of(" \t\r\n") == std::string_view::npos;
    return absl::InvalidArgumentError(absl::StrCat(
        blank ? "the file is empty" : "no step, epoch or test line",
        "; expected the JSON lines --metrics writes"));
  }
  return curves;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t <= hi + step * 1e-9;
       t += step) {
    // Snap to the step's grid: no 0.30000000000000004.
    ticks.push_back(std::round(t / step) * step);
  }
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string RenderSvg(const MetricsCurves& c, const std::string& title) {
  std::string out =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"380\" "
      "viewBox=\"0 0 900 380\" font-family=\"sans-serif\">\n"
      "<rect width=\"900\" height=\"380\" fill=\"white\"/>\n";
  absl::StrAppend(&out,
                  "<text x=\"450\" y=\"18\" text-anchor=\"middle\" "
                  "font-size=\"16\" font-weight=\"bold\">",
                  Escape(title), "</text>\n");
  absl::StrAppend(
      &out,
      DrawPanel(70, "loss",
                {{&c.step_loss, "#9ecae1", "step loss", true, false, 1},
                 {&c.epoch_loss, "#08519c", "epoch train loss", true, true, 2}},
                /*zero_to_one=*/false));
  absl::StrAppend(&out, DrawPanel(510, "accuracy",
                                  {{&c.epoch_accuracy, "#238b45",
                                    "epoch train accuracy", true, true, 2},
                                   {&c.test_accuracy, "#d94801",
                                    "test accuracy", false, true, 2}},
                                  /*zero_to_one=*/true));
  out += "</svg>\n";
  return out;
}

}  // namespace tandem::train
