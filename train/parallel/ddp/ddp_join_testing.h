// Test support (testonly): the model, inputs and checked uneven-input run
// that ddp_join_test (simulated cluster) and ddp_join_mpi_test (mpirun) share.
//
// The model is W [2, 1] with loss sum(x W), so each rank's gradient is its
// input x^T; inputs are small integers, so every expected value is computed
// with PyTorch's arithmetic (each rank's gradient times 1/d in f32, summed in
// rank order) and compared exactly. A buffer "total" adds up the column sums
// of every training input the rank sees and "calls" counts them, so a rank's
// buffers say whose buffers it received at each Forward.
//
// Thread-safety: one BufferModel per rank; the functions are reentrant.
#ifndef TANDEM_TRAIN_PARALLEL_DDP_DDP_JOIN_TESTING_H_
#define TANDEM_TRAIN_PARALLEL_DDP_DDP_JOIN_TESTING_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/communicator.h"
#include "tensor/nn/module.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {

// y = x W; in training mode total += column sums of x, calls += 1 (on the
// host, as BatchNorm's running statistics change in its forward), and the
// buffers found on entry are recorded. A third buffer (f32 "unused") makes
// three buffers travel in two collectives (f32, i64).
class BufferModel : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<BufferModel>> Create(float initial);
  absl::StatusOr<Tensor> Forward(const Tensor& x) override;
  std::string_view type_name() const override { return "BufferModel"; }

  std::vector<std::vector<float>> entry_totals;
  std::vector<int64_t> entry_calls;

 private:
  BufferModel() = default;
};

// Rank r's input at step t: one row [6 (r + t + 1), 12 (r + 1)].
float XA(int r, int t);
float XB(int r, int t);
absl::StatusOr<Tensor> Input(int r, int t);

// One DDP step on `batch` (Forward, Backward, then sgd->Step() when given);
// returns the reduced gradient of W.
absl::StatusOr<std::vector<float>> Step(DistributedDataParallel& ddp,
                                        optim::Sgd* sgd, const Tensor& batch);

struct JoinCase {
  std::vector<int> batches;  // per rank; the world size is its size
  bool divide_by_initial_world_size = true;
};
void PrintTo(const JoinCase& c, std::ostream* os);
// A test name: "3_5_4_initial", "2_3_1_3_remaining".
std::string JoinCaseName(const JoinCase& c);
// 3, 5, 4 on three ranks and 2, 3, 1, 3 on four, both divisor modes, and an
// even 2, 2, 2.
std::vector<JoinCase> JoinCases();

// Rank `rank`'s part of the case: DDP (broadcast_buffers on) inside a Join,
// SGD with lr 1, its own number of batches, then Join::Finish. Checks each
// step's gradient against the divisor rule, the buffers it received (from
// the highest rank still training), and after Finish the model (the last
// finisher's) and the number of shadowed steps; the first difference comes
// back as an Internal error naming rank, step and values.
absl::Status RunUnevenJoin(const JoinCase& c, int rank,
                           comm::Communicator& comm);

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DDP_DDP_JOIN_TESTING_H_
