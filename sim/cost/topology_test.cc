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

}  // namespace
}  // namespace tandem::sim::cost
