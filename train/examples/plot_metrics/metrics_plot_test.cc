#include "train/examples/plot_metrics/metrics_plot.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(ParseFlatJsonObjectTest, NumbersStringsNull) {
  std::map<std::string, std::string> strings;
  absl::StatusOr<std::map<std::string, double>> v = ParseFlatJsonObject(
      R"( {"kind":"step", "loss": 2.5e-1, "n": -3, "x": null, "b": true} )",
      &strings);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(strings.at("kind"), "step");
  EXPECT_EQ(v->at("loss"), 0.25);
  EXPECT_EQ(v->at("n"), -3);
  EXPECT_TRUE(std::isnan(v->at("x")));
  EXPECT_EQ(v->at("b"), 1);
  EXPECT_TRUE(ParseFlatJsonObject("{}", nullptr).ok());
}

TEST(ParseFlatJsonObjectTest, ErrorsSayWhatWasExpected) {
  EXPECT_THAT(ParseFlatJsonObject("[1]", nullptr).status().message(),
              HasSubstr("expected '{' at character 1"));
  EXPECT_THAT(ParseFlatJsonObject("{\"a\" 1}", nullptr).status().message(),
              HasSubstr("expected ':'"));
  EXPECT_THAT(ParseFlatJsonObject("{\"a\":x}", nullptr).status().message(),
              HasSubstr("expected a number"));
  EXPECT_THAT(ParseFlatJsonObject("{\"a\":1} x", nullptr).status().message(),
              HasSubstr("expected the end of the line"));
}

constexpr char kMetrics[] =
    "{\"kind\":\"step\",\"epoch\":1,\"step\":1,\"global_step\":1,\"loss\":2}\n"
    "{\"kind\":\"step\",\"epoch\":1,\"step\":2,\"global_step\":2,\"loss\":1}\n"
    "{\"kind\":\"epoch\",\"epoch\":1,\"train_loss\":1.5,"
    "\"train_accuracy\":0.5}\n"
    "\n"
    "{\"kind\":\"step\",\"epoch\":2,\"step\":1,\"global_step\":3,"
    "\"loss\":null}\n"
    "{\"kind\":\"step\",\"epoch\":2,\"step\":2,\"global_step\":4,"
    "\"loss\":0.5}\n"
    "{\"kind\":\"epoch\",\"epoch\":2,\"train_loss\":0.75,"
    "\"train_accuracy\":0.8}\n"
    "{\"kind\":\"test\",\"test_accuracy\":0.9,\"correct\":9,\"total\":10}\n";

TEST(ParseMetricsTest, CurvesOverTheGlobalStep) {
  absl::StatusOr<MetricsCurves> c = ParseMetrics(kMetrics);
  ASSERT_TRUE(c.ok()) << c.status();
  // The null loss of step 3 leaves no point, and is counted.
  EXPECT_THAT(c->step_loss, ElementsAre(Pair(1, 2), Pair(2, 1), Pair(4, 0.5)));
  EXPECT_EQ(c->non_finite, 1);
  EXPECT_EQ(c->first_non_finite, "line 5: \"loss\" is null");
  EXPECT_THAT(c->epoch_loss, ElementsAre(Pair(2, 1.5), Pair(4, 0.75)));
  EXPECT_THAT(c->epoch_accuracy, ElementsAre(Pair(2, 0.5), Pair(4, 0.8)));
  EXPECT_THAT(c->test_accuracy, ElementsAre(Pair(4, 0.9)));
}

TEST(ParseMetricsTest, BadLineNamesItsNumber) {
  absl::StatusOr<MetricsCurves> c = ParseMetrics(
      "{\"kind\":\"step\",\"global_step\":1,\"loss\":1}\nnot json\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("line 2: expected '{'"));
  c = ParseMetrics("{\"loss\":1}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("line 1: no \"kind\""));
}

// Issue 25: garbage is an error naming what was wrong, never a blank plot.
TEST(ParseMetricsTest, GarbageIsAnErrorNamingIt) {
  EXPECT_THAT(ParseMetrics("").status().message(),
              HasSubstr("the file is empty"));
  EXPECT_THAT(ParseMetrics("\n\n").status().message(),
              HasSubstr("the file is empty"));
  EXPECT_THAT(ParseMetrics("{\"kind\":\"other\"}\n").status().message(),
              HasSubstr("no step, epoch or test line"));
  EXPECT_THAT(
      ParseMetrics("{\"kind\":\"step\",\"global_step\":1,\"loss\":\"abc\"}")
          .status()
          .message(),
      HasSubstr("line 1: \"loss\" is \"abc\", not a number"));
  EXPECT_THAT(ParseMetrics("{\"kind\":\"step\",\"global_step\":1}\n")
                  .status()
                  .message(),
              HasSubstr("line 1: a step line without \"loss\""));
  // An epoch whose accuracy was not measured (null) is no error.
  absl::StatusOr<MetricsCurves> c = ParseMetrics(
      "{\"kind\":\"step\",\"global_step\":1,\"loss\":1}\n"
      "{\"kind\":\"epoch\",\"train_loss\":null,\"train_accuracy\":null}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->non_finite, 0);
}

TEST(NiceTicksTest, RoundSteps) {
  EXPECT_THAT(NiceTicks(0, 1, 5),
              ElementsAre(0, 0.2, 0.4, 0.6000000000000001, 0.8, 1));
  EXPECT_THAT(NiceTicks(1, 90, 6), ElementsAre(0, 20, 40, 60, 80, 100));
  EXPECT_THAT(NiceTicks(3, 3, 5), ElementsAre(3));
}

// Counts occurrences of `needle` in `hay`.
int Count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos;
       p = hay.find(needle, p + 1)) {
    ++n;
  }
  return n;
}

TEST(RenderSvgTest, TwoPanelsWithTheirCurves) {
  absl::StatusOr<MetricsCurves> c = ParseMetrics(kMetrics);
  ASSERT_TRUE(c.ok());
  const std::string svg = RenderSvg(*c, "demo <run>");
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_THAT(svg, HasSubstr(">demo &lt;run&gt;</text>"));
  EXPECT_THAT(svg, HasSubstr(">loss</text>"));
  EXPECT_THAT(svg, HasSubstr(">accuracy</text>"));
  // Three polylines: step loss, epoch loss, epoch accuracy (the single
  // test point is a dot only).
  EXPECT_EQ(Count(svg, "<polyline"), 3);
  // Dots: 2 epoch losses, 2 epoch accuracies, 1 test accuracy.
  EXPECT_EQ(Count(svg, "<circle"), 5);
  // The step-loss line has its 3 points.
  const size_t line = svg.find("stroke=\"#9ecae1\"");
  ASSERT_NE(line, std::string::npos);
  const size_t points = svg.find("points=\"", line);
  const std::string pts =
      svg.substr(points + 8, svg.find('"', points + 8) - points - 8);
  EXPECT_EQ(Count(pts, ","), 3) << pts;
  EXPECT_THAT(svg, HasSubstr("</svg>\n"));
}

TEST(RenderSvgTest, EmptyPanelsSayNoData) {
  const std::string svg = RenderSvg(MetricsCurves(), "empty");
  EXPECT_EQ(Count(svg, ">no data</text>"), 2);
  EXPECT_EQ(Count(svg, "<polyline"), 0);
}

}  // namespace
}  // namespace tandem::train
