#include "train/loop/run_monitor.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tandem::train {
namespace {

// A monitor writing progress to a temporary file, on a clock the test moves.
class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override { out_ = std::tmpfile(); }
  void TearDown() override { std::fclose(out_); }

  std::unique_ptr<RunMonitor> Make(ProgressMode mode, bool terminal,
                                   std::string metrics_path = "") {
    MonitorOptions o;
    o.name = "demo";
    o.progress = mode;
    o.out = out_;
    o.terminal = terminal;
    o.redraw_interval = absl::Milliseconds(200);
    o.plain_interval = absl::Seconds(10);
    o.metrics_path = std::move(metrics_path);
    o.clock = [this] { return now_; };
    return std::make_unique<RunMonitor>(std::move(o));
  }

  std::string Output() {
    std::fflush(out_);
    std::rewind(out_);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, out_)) > 0) s.append(buf, n);
    return s;
  }

  // 2 epochs of 4 steps of 64 samples, one step per second, loss 1/(step+1).
  void Train(RunMonitor& m) {
    for (int64_t e = 0; e < 2; ++e) {
      for (int64_t s = 0; s < 4; ++s) {
        now_ += absl::Seconds(1);
        m.Step({.epoch = e,
                .epochs = 2,
                .step = s,
                .steps_per_epoch = 4,
                .samples = 64,
                .loss = 1.0 / (e * 4 + s + 1)});
      }
      m.Epoch({.epoch = e,
               .epochs = 2,
               .train_loss = 0.5,
               .train_accuracy = 0.75,
               .samples = 256});
    }
  }

  std::FILE* out_ = nullptr;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(MonitorTest, PlainLinesEveryIntervalWithRateAndEta) {
  std::unique_ptr<RunMonitor> m = Make(ProgressMode::kAuto, /*terminal=*/false);
  // Steps 10 s apart: every step prints a line (plain_interval 10 s).
  for (int64_t s = 0; s < 3; ++s) {
    now_ += absl::Seconds(10);
    m->Step({.epoch = 0,
             .epochs = 1,
             .step = s,
             .steps_per_epoch = 3,
             .samples = 640,
             .loss = 0.5});
  }
  ASSERT_TRUE(m->Finish().ok());
  EXPECT_EQ(Output(),
            "demo: epoch 1/1 step 1/3 | 64 samples/s | loss 0.5000 | ETA "
            "0:00:20\n"
            "demo: epoch 1/1 step 2/3 | 64 samples/s | loss 0.5000 | ETA "
            "0:00:10\n"
            "demo: epoch 1/1 step 3/3 | 64 samples/s | loss 0.5000 | ETA "
            "0:00:00\n");
}

TEST_F(MonitorTest, PlainLinesSkipStepsWithinTheInterval) {
  std::unique_ptr<RunMonitor> m = Make(ProgressMode::kPlain, /*terminal=*/true);
  Train(*m);  // 8 steps, 1 s apart: within 10 s, so no line at all
  ASSERT_TRUE(m->Finish().ok());
  EXPECT_EQ(Output(), "");
}

TEST_F(MonitorTest, TerminalRedrawsOneLineAndBreaksItAtEpochs) {
  std::unique_ptr<RunMonitor> m = Make(ProgressMode::kAuto, /*terminal=*/true);
  Train(*m);
  ASSERT_TRUE(m->Finish().ok());
  const std::string out = Output();
  // Every step redraws (1 s > 200 ms): back to column 0, text, clear the
  // rest of the line; the epoch ends the line.
  EXPECT_EQ(out.substr(0, 71),
            "\rdemo: epoch 1/2 step 1/4 | 64 samples/s | loss 1.0000 | ETA "
            "0:00:07\x1b[K");
  EXPECT_NE(out.find("\rdemo: epoch 1/2 step 4/4 | 64 samples/s | loss 0.2500 "
                     "| ETA 0:00:04\x1b[K\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\rdemo: epoch 2/2 step 4/4 | 64 samples/s | loss 0.1250 "
                     "| ETA 0:00:00\x1b[K\n"),
            std::string::npos)
      << out;
  int newlines = 0;
  for (char c : out) newlines += c == '\n';
  EXPECT_EQ(newlines, 2);  // one per epoch
}

TEST_F(MonitorTest, OffPrintsNothing) {
  std::unique_ptr<RunMonitor> m = Make(ProgressMode::kOff, /*terminal=*/true);
  Train(*m);
  ASSERT_TRUE(m->Finish().ok());
  EXPECT_EQ(Output(), "");
}

TEST_F(MonitorTest, MetricsFileHasOneJsonLinePerStepEpochAndTest) {
  const std::string path = ::testing::TempDir() + "/metrics.jsonl";
  std::unique_ptr<RunMonitor> m =
      Make(ProgressMode::kOff, /*terminal=*/false, path);
  now_ += absl::Seconds(2);  // setup time: not counted in the first step
  m->Step({.epoch = 0,
           .epochs = 1,
           .step = 0,
           .steps_per_epoch = 1,
           .samples = 64,
           .loss = 2.5,
           .comm_seconds = 0.25,
           .wait_seconds = 0.125});
  now_ += absl::Seconds(1);
  m->Epoch({.epoch = 0,
            .epochs = 1,
            .train_loss = 2.5,
            .train_accuracy = 0.5,
            .samples = 64});
  m->Test(0.875, 7, 8);
  ASSERT_TRUE(m->Finish().ok());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(),
            "{\"kind\":\"step\",\"epoch\":1,\"step\":1,\"global_step\":1,"
            "\"samples\":64,\"loss\":2.5,\"step_s\":2,\"samples_per_s\":32,"
            "\"comm_s\":0.25,\"wait_s\":0.125,\"time_s\":2}\n"
            "{\"kind\":\"epoch\",\"epoch\":1,\"train_loss\":2.5,"
            "\"train_accuracy\":0.5,\"samples\":64,\"epoch_s\":3,"
            "\"samples_per_s\":21.3333333,\"time_s\":3}\n"
            "{\"kind\":\"test\",\"test_accuracy\":0.875,\"correct\":7,"
            "\"total\":8,\"time_s\":3}\n");
}

TEST_F(MonitorTest, LossScaleAndSkippedStepsAreWrittenAndShown) {
  const std::string path = ::testing::TempDir() + "/scale.jsonl";
  std::unique_ptr<RunMonitor> m =
      Make(ProgressMode::kPlain, /*terminal=*/false, path);
  for (int64_t s = 0; s < 2; ++s) {
    now_ += absl::Seconds(10);
    m->Step({.epoch = 0,
             .epochs = 1,
             .step = s,
             .steps_per_epoch = 2,
             .samples = 10,
             .loss = 0.5,
             .loss_scale = s == 0 ? 65536.0 : 32768.0,
             .skipped = s == 0});
  }
  ASSERT_TRUE(m->Finish().ok());
  std::ifstream f(path);
  std::string first, second;
  std::getline(f, first);
  std::getline(f, second);
  EXPECT_NE(first.find("\"scale\":65536,\"skipped\":true,\"time_s\""),
            std::string::npos)
      << first;
  EXPECT_NE(second.find("\"scale\":32768,\"skipped\":false,"),
            std::string::npos)
      << second;
  EXPECT_EQ(Output(),
            "demo: epoch 1/1 step 1/2 | 1 samples/s | loss 0.5000 | ETA "
            "0:00:10 | scale 65536\n"
            "demo: epoch 1/1 step 2/2 | 1 samples/s | loss 0.5000 | ETA "
            "0:00:00 | scale 32768\n");
}

TEST_F(MonitorTest, StepsWithoutAScaleWriteNone) {
  const std::string path = ::testing::TempDir() + "/noscale.jsonl";
  std::unique_ptr<RunMonitor> m =
      Make(ProgressMode::kOff, /*terminal=*/false, path);
  Train(*m);
  ASSERT_TRUE(m->Finish().ok());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str().find("scale"), std::string::npos);
  EXPECT_EQ(ss.str().find("skipped"), std::string::npos);
}

TEST_F(MonitorTest, NonFiniteValuesAreJsonNull) {
  const std::string path = ::testing::TempDir() + "/nan.jsonl";
  std::unique_ptr<RunMonitor> m =
      Make(ProgressMode::kOff, /*terminal=*/false, path);
  m->Epoch({.epoch = 0, .epochs = 1, .samples = 0});
  ASSERT_TRUE(m->Finish().ok());
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  EXPECT_EQ(line,
            "{\"kind\":\"epoch\",\"epoch\":1,\"train_loss\":null,"
            "\"train_accuracy\":null,\"samples\":0,\"epoch_s\":0,"
            "\"samples_per_s\":null,\"time_s\":0}");
}

TEST(RunMonitorFileTest, UncreatableMetricsFileNamesIt) {
  MonitorOptions o;
  o.progress = ProgressMode::kOff;
  o.metrics_path = "/nonexistent/folder/m.jsonl";
  RunMonitor m(o);
  m.Test(1, 1, 1);
  const absl::Status s = m.Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("--metrics=/nonexistent/folder/m.jsonl: writing "
                             "the file failed (No such file or directory)"),
            std::string::npos)
      << s;
  EXPECT_TRUE(m.Finish().ok());  // reported once
}

TEST(RunMonitorFileTest, NoLineNoFile) {
  const std::string path = ::testing::TempDir() + "/never.jsonl";
  MonitorOptions o;
  o.metrics_path = path;
  {
    RunMonitor m(o);
    EXPECT_TRUE(m.Finish().ok());
  }
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(RunMonitorParseTest, ProgressModes) {
  EXPECT_EQ(*ParseProgressMode("auto"), ProgressMode::kAuto);
  EXPECT_EQ(*ParseProgressMode("plain"), ProgressMode::kPlain);
  EXPECT_EQ(*ParseProgressMode("off"), ProgressMode::kOff);
  EXPECT_EQ(ParseProgressMode("on").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RunMonitorEtaTest, Formats) {
  EXPECT_EQ(FormatEta(0), "0:00:00");
  EXPECT_EQ(FormatEta(12.4), "0:00:12");
  EXPECT_EQ(FormatEta(3723), "1:02:03");
  EXPECT_EQ(FormatEta(90000), "1d 1:00:00");
  EXPECT_EQ(FormatEta(-1), "?");
  EXPECT_EQ(FormatEta(kUnknown), "?");
}

TEST(RunMonitorActiveTest, ScopedActiveNests) {
  EXPECT_EQ(ActiveRunMonitor(), nullptr);
  RunMonitor a({});
  {
    ScopedActiveRunMonitor scoped(&a);
    EXPECT_EQ(ActiveRunMonitor(), &a);
  }
  EXPECT_EQ(ActiveRunMonitor(), nullptr);
}

}  // namespace
}  // namespace tandem::train
