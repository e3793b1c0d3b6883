// The check that SyncBatchNorm at N ranks with b samples each equals
// nn::BatchNorm2d at one rank with the N * b samples (outputs, input
// gradients, running statistics, and the ranks' parameter gradients
// summed), shared by the sim test (sync_batch_norm_test) and the mpirun one
// (sync_batch_norm_mpi_test). testonly.
//
//   sim::Run(3, [](int, comm::Communicator& comm) {
//     return CheckSyncBatchNormRank(comm);
//   });
//
// Each rank computes the one-rank reference itself (every rank draws the
// whole batch from fixed seeds), trains a SyncBatchNorm over `comm` on its
// rows for kSteps steps, compares, and all-reduces its parameter gradients
// to compare their sum. Collective; blocking.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_SYNC_BATCH_NORM_SCENARIO_H_
#define TANDEM_TRAIN_PARALLEL_DDP_SYNC_BATCH_NORM_SCENARIO_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/nn/layers/batch_norm.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::train::sync_bn_testing {

inline constexpr int64_t kPerRank = 2;  // b
inline constexpr int64_t kC = 3, kH = 2, kW = 3;
inline constexpr int kSteps = 2;

// f64 throughout. The sync path combines the ranks' (mean, biased var)
// with Chan's formula where BatchNorm2d sums all N * b * H * W values at
// once, so the two differ by rounding only (the largest difference seen,
// with the tolerance set to 0: 2.1e-14, on values up to ~40); 1e-12 leaves
// a 50x margin and still fails on any real difference (a wrong count or a
// missing all-reduce changes results by 1e-2 or more).
inline constexpr double kTol = 1e-12;

// BatchNorm2d's options of the scenario: eps 1e-5, momentum 0.1, f64.
nn::BatchNorm2d::Options Options();

// n values N(0.5, 2^2) from Generator(seed).
std::vector<double> Draw(int64_t n, uint64_t seed);

// Rows [first, first + rows) of a [*, kC, kH, kW] batch as a fresh tensor.
absl::StatusOr<Tensor> Rows(const std::vector<double>& all, int64_t first,
                            int64_t rows);

// Sets a BatchNorm's weight and bias to fixed values other than 1 and 0.
absl::Status SetAffine(nn::Module& bn);

// One rank's part of the check (above): OK, or an error naming the world
// size, the rank, the step, the quantity, the index and both values.
absl::Status CheckSyncBatchNormRank(comm::Communicator& comm);

}  // namespace tandem::train::sync_bn_testing

#endif  // TANDEM_TRAIN_PARALLEL_DDP_SYNC_BATCH_NORM_SCENARIO_H_
