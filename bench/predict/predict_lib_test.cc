#include "bench/predict/predict_lib.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sim/cost/collective_cost.h"

namespace tandem::bench {
namespace {

PredictConfig Small() {
  PredictConfig c;
  c.input = 64;
  c.hidden = 64;
  c.layers = 1;
  c.batch = 8;
  c.world_size = 4;
  c.steps = 2;
  return c;
}

TEST(PredictTest, CommunicationOnlyStepIsTheModelledAllReduce) {
  // No compute charged: the step is the one gradient bucket's all-reduce,
  // fully exposed. (64*64 + 64 + 64*10 + 10) f32 = 18984 bytes, one bucket.
  PredictConfig c = Small();
  c.compute_scale = 0;
  absl::StatusOr<Prediction> p = Predict(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->world_size, 4);
  EXPECT_EQ(p->parameters, 64 * 64 + 64 + 64 * 10 + 10);
  sim::cost::Topology t = *sim::cost::MakeTopology("h100-nvlink");
  t.gpus_per_node = 4;
  const double d = *sim::cost::CollectiveSeconds(t, comm::OpKind::kAllReduce,
                                                 p->parameters * 4,
                                                 sim::cost::Algorithm::kAuto);
  EXPECT_NEAR(p->step_s, d, 1e-12);
  EXPECT_NEAR(p->exposed_comm_s, d, 1e-12);
  EXPECT_NEAR(p->comm_s, d, 1e-12);
  EXPECT_EQ(p->compute_s, 0);
  EXPECT_EQ(p->efficiency(), 0);
}

TEST(PredictTest, StepIsComputePlusExposedCommunication) {
  PredictConfig c = Small();
  c.compute_scale = 1;
  absl::StatusOr<Prediction> p = Predict(c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT(p->compute_s, 0);
  EXPECT_NEAR(p->step_s, p->compute_s + p->exposed_comm_s, 1e-12);
  EXPECT_GT(p->efficiency(), 0);
  EXPECT_LE(p->efficiency(), 1);
}

TEST(PredictTest, BadConfigurationsAreInvalidArgument) {
  PredictConfig c = Small();
  c.world_size = 12;  // not one node of fewer than 8, not 8 x nodes
  EXPECT_EQ(Predict(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = Small();
  c.preset = "tpu";
  EXPECT_EQ(Predict(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = Small();
  c.steps = 0;
  EXPECT_EQ(Predict(c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DeviceComputeScale("tpu").ok());
  EXPECT_EQ(*DeviceComputeScale("host"), 1.0);
}

TEST(PredictTest, FormatsARow) {
  Prediction p;
  p.world_size = 8;
  p.step_s = 2e-3;
  p.compute_s = 1.5e-3;
  p.exposed_comm_s = 0.5e-3;
  p.comm_s = 0.75e-3;
  EXPECT_EQ(FormatRow(p),
            "     8       2.0000       1.5000       0.5000       0.7500    "
            "75.0%\n");
}

}  // namespace
}  // namespace tandem::bench
