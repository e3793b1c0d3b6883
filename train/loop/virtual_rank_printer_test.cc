// VirtualRankPrinter: off, each rank prints its own "[GPUk]" lines at once;
// on, rank 0 prints every virtual rank's lines in virtual-rank order at
// Flush, whatever W, and a rank cannot print for a virtual rank it does not
// play.
#include "train/loop/virtual_rank_printer.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/output_capture.h"
#include "sim/sim.h"

namespace tandem::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every rank's captured lines after each virtual rank printed two lines
// (the second of two lines of text) and the ranks flushed.
std::vector<std::vector<std::string>> Printed(int world, int64_t k) {
  sim::OutputCapture capture;
  sim::Options options;
  options.capture = &capture;
  sim::RunResult r = sim::Run(
      world,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(VirtualWorld vw,
                                PlaceVirtualWorld(k, comm.size(), rank));
        VirtualRankPrinter out(comm, Device::CPU(), vw);
        for (int64_t v = 0; v < vw.local; ++v) {
          TANDEM_RETURN_IF_ERROR(out.PrintOnRank(vw.rank_of(v), "step 1"));
        }
        for (int64_t v = vw.local - 1; v >= 0; --v) {  // any order
          TANDEM_RETURN_IF_ERROR(out.PrintOnRank(
              vw.rank_of(v),
              "loss " + std::to_string(vw.rank_of(v)) + "\nend"));
        }
        return out.Flush();
      },
      options);
  EXPECT_TRUE(r.ok()) << r.status();
  std::vector<std::vector<std::string>> lines;
  for (int rank = 0; rank < world; ++rank) lines.push_back(capture.Lines(rank));
  return lines;
}

TEST(VirtualRankPrinterTest, OnRankZeroPrintsEveryVirtualRankInOrder) {
  const std::vector<std::string> want = {
      "[GPU0] step 1", "[GPU0] loss 0", "[GPU0] end",    "[GPU1] step 1",
      "[GPU1] loss 1", "[GPU1] end",    "[GPU2] step 1", "[GPU2] loss 2",
      "[GPU2] end",    "[GPU3] step 1", "[GPU3] loss 3", "[GPU3] end"};
  for (int w : {1, 2, 4}) {
    SCOPED_TRACE(w);
    const auto lines = Printed(w, 4);
    EXPECT_EQ(lines[0], want);
    for (int rank = 1; rank < w; ++rank) EXPECT_TRUE(lines[rank].empty());
  }
}

TEST(VirtualRankPrinterTest, OffEachRankPrintsItsOwnAtOnce) {
  const auto lines = Printed(2, 0);
  EXPECT_THAT(lines[0],
              ElementsAre("[GPU0] step 1", "[GPU0] loss 0", "[GPU0] end"));
  EXPECT_THAT(lines[1],
              ElementsAre("[GPU1] step 1", "[GPU1] loss 1", "[GPU1] end"));
}

TEST(VirtualRankPrinterTest, ARankPrintsOnlyForItsOwnVirtualRanks) {
  sim::RunResult r = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    absl::StatusOr<VirtualWorld> vw = PlaceVirtualWorld(4, 2, rank);
    if (!vw.ok()) return vw.status();
    VirtualRankPrinter out(comm, Device::CPU(), *vw);
    absl::Status s = out.PrintOnRank(rank == 0 ? 2 : 0, "x");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("is not one this rank plays"));
    return out.Flush();  // nothing kept: nothing printed
  });
  EXPECT_TRUE(r.ok()) << r.status();
}

}  // namespace
}  // namespace tandem::train
