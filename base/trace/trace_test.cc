#include "base/trace/trace.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tandem::trace {
namespace {

// Each test starts from an empty, stopped recorder.
class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Stop();
    Clear();
  }
  void TearDown() override {
    Stop();
    Clear();
  }
};

TEST_F(TraceTest, OffByDefaultRecordsNothing) {
  EXPECT_FALSE(Enabled());
  {
    ScopedThreadRank rank(0);
    Scope s("forward", "model");
    EXPECT_FALSE(s.recording());
    Record("AllReduce", "comm", absl::Now(), absl::Now(), Track::kComm);
  }
  EXPECT_TRUE(Snapshot().empty());
}

TEST_F(TraceTest, ScopesLandOnTheirRankMainTrackNested) {
  Start();
  {
    ScopedThreadRank rank(3);
    Scope outer("step", "train");
    { Scope inner("forward", "model"); }
  }
  Stop();
  const std::vector<Event> events = Snapshot();
  ASSERT_EQ(events.size(), 2u);
  // Sorted by start: the outer scope started first.
  EXPECT_EQ(events[0].name, "step");
  EXPECT_EQ(events[0].category, "train");
  EXPECT_EQ(events[1].name, "forward");
  for (const Event& e : events) {
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.tid, 0);
  }
  EXPECT_GE(events[1].start_us, events[0].start_us);
  EXPECT_LE(events[1].start_us + events[1].duration_us,
            events[0].start_us + events[0].duration_us);
}

TEST_F(TraceTest, CommTrackAndArgs) {
  Start();
  {
    ScopedThreadRank rank(1);
    const absl::Time t0 = absl::FromUnixMicros(1000);
    Record("AllReduce", "comm", t0, t0 + absl::Microseconds(250), Track::kComm,
           Args().Add("bytes", int64_t{4096}).Add("op", "sum").str());
  }
  const std::vector<Event> events = Snapshot();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 1);
  EXPECT_EQ(events[0].tid, 1);
  EXPECT_EQ(events[0].start_us, 1000);
  EXPECT_EQ(events[0].duration_us, 250);
  EXPECT_EQ(events[0].args, "\"bytes\":4096,\"op\":\"sum\"");
}

// What a device's stream ran goes on the rank's "device stream" track
// (tid 2), named so in the JSON, beside its main and comm tracks.
TEST_F(TraceTest, DeviceTrackIsTheRanksThirdTrack) {
  Start();
  {
    ScopedThreadRank rank(3);
    const absl::Time t0 = absl::FromUnixMicros(2000);
    Record("AllReduce bucket 0", "comm", t0, t0 + absl::Microseconds(90),
           Track::kComm);
    Record("AllReduce bucket 0", "device", t0 + absl::Microseconds(30),
           t0 + absl::Microseconds(80), Track::kDevice);
  }
  const std::vector<Event> events = Snapshot();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].tid, 1);
  EXPECT_EQ(events[1].tid, 2);
  EXPECT_EQ(events[1].rank, 3);
  EXPECT_EQ(events[1].start_us, 2030);
  EXPECT_EQ(events[1].duration_us, 50);
  const std::string json = ToChromeJson(events);
  EXPECT_NE(
      json.find("\"pid\":3,\"tid\":2,\"args\":{\"name\":\"device stream\"}"),
      std::string::npos)
      << json;
}

TEST_F(TraceTest, ThreadRankIsRestored) {
  EXPECT_EQ(ThreadRank(), -1);
  {
    ScopedThreadRank a(2);
    EXPECT_EQ(ThreadRank(), 2);
    {
      ScopedThreadRank b(5);
      EXPECT_EQ(ThreadRank(), 5);
    }
    EXPECT_EQ(ThreadRank(), 2);
  }
  EXPECT_EQ(ThreadRank(), -1);
}

TEST_F(TraceTest, ThreadWithoutRankGoesToHostTrack) {
  Start();
  std::thread([] { Scope s("load", "data"); }).join();
  const std::vector<Event> events = Snapshot();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, -1);
  EXPECT_GE(events[0].tid, 3);  // 0-2: a rank's main, comm, device tracks
  const std::string json = ToChromeJson(events);
  EXPECT_NE(json.find("\"name\":\"host\""), std::string::npos) << json;
}

// Ranks record concurrently while another thread snapshots: nothing lost,
// each rank's events on its own track (TSan checks the locking).
TEST_F(TraceTest, ConcurrentRanksLoseNothing) {
  constexpr int kRanks = 8;
  constexpr int kEvents = 500;
  Start();
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([r] {
      ScopedThreadRank rank(r);
      for (int i = 0; i < kEvents; ++i) Scope s("op", "test");
    });
  }
  for (int i = 0; i < 20; ++i) Snapshot();
  for (std::thread& t : threads) t.join();
  const std::vector<Event> events = Snapshot();
  ASSERT_EQ(events.size(), static_cast<size_t>(kRanks * kEvents));
  std::vector<int> per_rank(kRanks, 0);
  for (const Event& e : events) {
    ASSERT_GE(e.rank, 0);
    ASSERT_LT(e.rank, kRanks);
    EXPECT_EQ(e.tid, 0);
    ++per_rank[e.rank];
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(per_rank[r], kEvents) << r;
}

TEST_F(TraceTest, JsonEscapesAndNamesTracks) {
  Event e;
  e.name = "a\"b\\c\nd";
  e.category = "x";
  e.rank = 0;
  e.tid = 1;
  e.start_us = 5;
  e.duration_us = 7;
  const std::string json = ToChromeJson({e});
  EXPECT_NE(json.find("\"name\":\"a\\\"b\\\\c\\nd\""), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"args\":{\"name\":\"rank 0\"}"), std::string::npos);
  EXPECT_NE(json.find("\"args\":{\"name\":\"comm\"}"), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":5,\"dur\":7"),
            std::string::npos)
      << json;
}

TEST_F(TraceTest, NonFiniteArgsBecomeStrings) {
  EXPECT_EQ(Args().Add("loss", 1.0 / 0.0).str(), "\"loss\":\"inf\"");
  EXPECT_EQ(Args().Add("loss", 0.5).str(), "\"loss\":0.5");
}

TEST_F(TraceTest, WriteToMissingFolderNamesThePath) {
  const absl::Status s = WriteChromeTrace("/nonexistent/folder/t.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/folder/t.json"), std::string::npos)
      << s;
}

TEST_F(TraceTest, MergeRefusesAFileThatIsNotATrace) {
  const std::string dir = ::testing::TempDir();
  const std::string bad = dir + "/not_a_trace.json";
  std::ofstream(bad) << "{\"hello\": 1}\n";
  const absl::Status s = MergeChromeTraces({bad}, dir + "/out.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(bad), std::string::npos) << s;
  EXPECT_EQ(
      MergeChromeTraces({dir + "/missing.json"}, dir + "/out.json").code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::trace
