// The measured bubble of both schedules equals the textbook
// (p - 1) / (m + p - 1) on the simulated clock. Simulated time, not wall
// time: deterministic (compute_scale 0, only charged times), so the
// tolerance is for double rounding of sums of seconds only.
#include "bench/pipeline_bubble.h"

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

TEST(PipelineBubbleTest, BothSchedulesMatchTheTextbookBubble) {
  for (train::PipelineSchedule schedule :
       {train::PipelineSchedule::kGPipe, train::PipelineSchedule::k1F1B}) {
    for (int p : {2, 4}) {
      for (int64_t m : {1, 2, 3, 5, 8}) {
        absl::StatusOr<BubbleResult> r = MeasureBubble(
            {.stages = p, .micro_batches = m, .schedule = schedule});
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_NEAR(r->bubble, r->predicted, 1e-9)
            << train::PipelineScheduleName(schedule) << " p=" << p
            << " m=" << m;
        EXPECT_NEAR(r->step_s, (m + p - 1) * 3.0, 1e-9);
      }
    }
  }
}

TEST(PipelineBubbleTest, RejectsBadCases) {
  EXPECT_FALSE(MeasureBubble({.stages = 0}).ok());
  EXPECT_FALSE(MeasureBubble({.stages = 2, .micro_batches = 0}).ok());
}

}  // namespace
}  // namespace tandem::bench
