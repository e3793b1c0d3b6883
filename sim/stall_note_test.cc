// Stall notes: while rank 0 waits, it writes "still waiting for ..." lines to
// stderr at Options::stall_note_interval, naming the ranks that have not
// issued the operation, before the timeout fails it.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/types.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "sim/test_util.h"

namespace tandem::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

using StallNoteTest = testing::ModeTest;

absl::Status AllReduceUnlessLate(int rank, comm::Communicator& comm) {
  if (rank == 2) {  // never issues it before the others' timeout
    testing::Nap(absl::Milliseconds(2500));
    return absl::OkStatus();
  }
  std::vector<float> v(8, 1.0f);
  return comm
      .AllReduce(comm::HostView(absl::MakeSpan(v)), comm::ReduceOp::kSum)
      ->Wait();
}

TEST_P(StallNoteTest, RankZeroNotesEachIntervalThenTheTimeoutNamesTheMissing) {
  Options options;
  options.timeout = absl::Milliseconds(1500);
  options.stall_note_interval = absl::Milliseconds(400);
  ::testing::internal::CaptureStderr();
  RunResult result = RunRanks(3, AllReduceUnlessLate, options);
  const std::string notes = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded)
      << result.status();
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("collective #0 AllReduce(f32 x 8, sum) did not "
                        "complete within 1.5s: rank 2 (it has issued 0 "
                        "collectives) never issued it"));
  // Three expected (400, 800, 1200 ms); a loaded machine may skip one.
  const std::vector<std::string> lines =
      absl::StrSplit(notes, '\n', absl::SkipEmpty());
  EXPECT_GE(lines.size(), 2u) << notes;
  EXPECT_LE(lines.size(), 3u) << notes;
  for (const std::string& line : lines) {
    EXPECT_THAT(line,
                MatchesRegex("rank 0: still waiting for collective #0 "
                             "AllReduce\\(f32 x 8, sum\\) for [0-9.]+m?s; not "
                             "yet issued by rank 2 \\(it has issued 0 "
                             "collectives\\); timeout in [0-9.]+m?s"));
  }
}

TEST_P(StallNoteTest, NoNotesWhenOffOrWhenTheWaitIsQuick) {
  EXPECT_EQ(Options().stall_note_interval, absl::Seconds(30));
  Options options;
  options.timeout = absl::Milliseconds(800);
  options.stall_note_interval = absl::ZeroDuration();
  ::testing::internal::CaptureStderr();
  RunResult late = RunRanks(3, AllReduceUnlessLate, options);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(late.ok());

  options.stall_note_interval = absl::Seconds(30);
  ::testing::internal::CaptureStderr();
  RunResult quick = RunRanks(
      3, [](int, comm::Communicator& comm) { return comm.Barrier(); }, options);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(quick.ok()) << quick.status();
}

TEST_P(StallNoteTest, NegativeIntervalIsRejected) {
  Options options;
  options.stall_note_interval = absl::Seconds(-1);
  RunResult result = RunRanks(
      2, [](int, comm::Communicator&) { return absl::OkStatus(); }, options);
  EXPECT_EQ(result.launch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.launch.message()),
              HasSubstr("stall_note_interval"));
}

TANDEM_SIM_TEST_BOTH_MODES(StallNoteTest);

}  // namespace
}  // namespace tandem::sim
