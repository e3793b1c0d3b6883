// LoadOnRank0AndBroadcast and Rank0Says on simulated ranks: only rank 0
// loads; every rank ends with its rows, or with an error naming the path.
#include "train/data/datasets/broadcast_dataset.h"

#include <atomic>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/sim.h"
#include "tensor/tensor.h"

namespace tandem::train {
namespace {

using ::testing::HasSubstr;

TEST(BroadcastDatasetTest, RankZeroLoadsAndEveryRankGetsItsRows) {
  std::atomic<int> loads{0};
  std::vector<std::vector<float>> features(3);
  std::vector<std::vector<int64_t>> labels(3);
  std::vector<bool> says(3);
  sim::RunResult run = sim::Run(3, [&](int rank, comm::Communicator& comm) {
    absl::StatusOr<TensorDataset> data =
        LoadOnRank0AndBroadcast(comm, "rows", [&] {
          ++loads;
          return TensorDataset::Create(
              *Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2}),
              *Tensor::FromVector<int64_t>({7, 8, 9}, {3}));
        });
    if (!data.ok()) return data.status();
    features[rank] = *data->features.ToVector<float>();
    labels[rank] = *data->labels.ToVector<int64_t>();
    if (data->features.shape() != std::vector<int64_t>{3, 2}) {
      return absl::InternalError("wrong shape");
    }
    absl::StatusOr<bool> said = Rank0Says(comm, rank == 0);
    if (!said.ok()) return said.status();
    says[rank] = *said;
    return absl::OkStatus();
  });
  for (const absl::Status& s : run.ranks) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(loads.load(), 1);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(features[rank], (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(labels[rank], (std::vector<int64_t>{7, 8, 9}));
    EXPECT_TRUE(says[rank]);  // rank 0's value
  }
}

// Each rank keeps its status and returns OK after a barrier, so that rank
// 0's error does not abort rank 1's broadcast.
TEST(BroadcastDatasetTest, RankZerosErrorOnRankZeroTheReasonElsewhere) {
  std::vector<absl::Status> statuses(2);
  sim::RunResult run = sim::Run(2, [&](int rank, comm::Communicator& comm) {
    statuses[rank] = LoadOnRank0AndBroadcast(comm, "/dev/stdin", [] {
                       return absl::StatusOr<TensorDataset>(
                           absl::DataLossError("/dev/stdin: cut short"));
                     }).status();
    return comm.Barrier();
  });
  for (const absl::Status& s : run.ranks) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(statuses[0], absl::DataLossError("/dev/stdin: cut short"));
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(statuses[1].message(),
              HasSubstr("rank 0 could not read /dev/stdin"));
}

}  // namespace
}  // namespace tandem::train
