#include "sim/cost/topology.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace tandem::sim::cost {
namespace {

TEST(TopologyTest, EveryPresetBuilds) {
  for (const std::string& name : PresetNames()) {
    absl::StatusOr<Topology> t = MakeTopology(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->name, name);
    EXPECT_EQ(t->world_size(), 8);
    EXPECT_GT(t->intra.BytesPerSecond(), 0);
  }
}

TEST(TopologyTest, NodesAndNics) {
  absl::StatusOr<Topology> t = MakeTopology("a100-nvlink", 16, 4, 200);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->world_size(), 128);
  EXPECT_EQ(t->nics_per_node, 4);
  EXPECT_DOUBLE_EQ(t->nic.peak_gbytes_per_s, 25);
  EXPECT_EQ(Describe(*t), "a100-nvlink x 16 nodes, 4 x 200 Gb/s NICs per node");
  EXPECT_EQ(Describe(*MakeTopology("h100-nvls")), "h100-nvls x 1 node");
}

TEST(TopologyTest, BadArgumentsSayWhatIsAccepted) {
  absl::StatusOr<Topology> t = MakeTopology("tpu-v5");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("h100-nvls"), std::string::npos);
  EXPECT_FALSE(MakeTopology("h100-nvlink", 0).ok());
  EXPECT_FALSE(MakeTopology("h100-nvlink", 2, 0).ok());
  EXPECT_FALSE(MakeTopology("h100-nvlink", 2, 9).ok());
  EXPECT_FALSE(MakeTopology("h100-nvlink", 2, 8, 0).ok());
  // One node needs no NICs.
  EXPECT_TRUE(MakeTopology("h100-nvlink", 1, 0).ok());
}

TEST(TopologyTest, SubTopologyOfReplicasAcrossNodes) {
  // 4 nodes of 8: rank r is GPU r % 8 of node r / 8.
  absl::StatusOr<Topology> t = MakeTopology("h100-nvlink", 4, 8, 400);
  ASSERT_TRUE(t.ok()) << t.status();
  // One GPU per node (a pipeline stage's replicas, 8 stages per node).
  absl::StatusOr<Topology> rail = SubTopology(*t, {3, 11, 19, 27});
  ASSERT_TRUE(rail.ok()) << rail.status();
  EXPECT_EQ(rail->nodes, 4);
  EXPECT_EQ(rail->gpus_per_node, 1);
  EXPECT_EQ(rail->nics_per_node, 1);
  EXPECT_EQ(rail->world_size(), 4);
  // Two nodes, up to three members on one of them.
  absl::StatusOr<Topology> uneven = SubTopology(*t, {0, 1, 2, 8});
  ASSERT_TRUE(uneven.ok()) << uneven.status();
  EXPECT_EQ(uneven->nodes, 2);
  EXPECT_EQ(uneven->gpus_per_node, 3);
  EXPECT_EQ(uneven->nics_per_node, 3);
  // Inside one node: the node's links, no NICs needed.
  absl::StatusOr<Topology> local = SubTopology(*t, {4, 5});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->nodes, 1);
  EXPECT_EQ(local->gpus_per_node, 2);
  EXPECT_DOUBLE_EQ(local->intra.BytesPerSecond(), t->intra.BytesPerSecond());
}

TEST(TopologyTest, SubTopologyRefusesRanksOutsideTheMachine) {
  absl::StatusOr<Topology> t = MakeTopology("a100-nvlink");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(SubTopology(*t, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Topology> bad = SubTopology(*t, {0, 8});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("rank 8 is not in"), std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace tandem::sim::cost
