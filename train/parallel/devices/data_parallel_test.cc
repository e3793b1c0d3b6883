#include "train/parallel/devices/data_parallel.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/test_util.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/sim_device/sim_device.h"

namespace tandem::train {
namespace {

constexpr int64_t kIn = 10, kHidden = 16, kOut = 5;

absl::StatusOr<std::unique_ptr<nn::Module>> MakeModel(int64_t in = kIn) {
  Generator gen(42);
  nn::Linear::Options f64;
  f64.dtype = DType::kF64;
  auto m = std::make_unique<nn::Sequential>();
  absl::Status s = m->Append(nn::Linear::Create(in, kHidden, gen, f64));
  if (s.ok()) s = m->Append(std::make_unique<nn::ReLU>());
  if (s.ok()) s = m->Append(nn::Linear::Create(kHidden, kOut, gen, f64));
  if (!s.ok()) return s;
  return std::unique_ptr<nn::Module>(std::move(m));
}

// A fixed batch (deterministic values) on `device`.
absl::StatusOr<Tensor> Batch(int64_t rows, int64_t cols, double scale,
                             Device device) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = scale * std::sin(0.37 * static_cast<double>(i) + scale);
  }
  absl::StatusOr<Tensor> t = Tensor::FromVector(v, {rows, cols});
  if (!t.ok()) return t.status();
  return t->To(device);
}

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_NN_ASSERT_OK(InstallSimDevices(4));
    ResetSimCopyCounters();
  }
};

std::vector<Device> SimDevices(int k) {
  std::vector<Device> d;
  for (int i = 0; i < k; ++i) d.push_back(Device::Sim(i));
  return d;
}

// Trains `steps` SGD steps (momentum) on a 7-row batch: with k devices the
// chunks are uneven (4,3 / 3,3,1 / 2,2,2,1).
void Train(nn::Module& model, nn::Module& params_of, int steps) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      optim::Sgd sgd, optim::Sgd::Create(params_of.Parameters(), 0.05,
                                         optim::SgdOptions{.momentum = 0.9}));
  for (int step = 0; step < steps; ++step) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x,
                                   Batch(7, kIn, 1.0 + step, Device::Sim(0)));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t,
                                   Batch(7, kOut, 0.5 + step, Device::Sim(0)));
    params_of.ZeroGrad();
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, model.Forward(x));
    ASSERT_EQ(y.device(), Device::Sim(0));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Mse(y, t));
    TANDEM_NN_ASSERT_OK(loss.Backward());
    TANDEM_NN_ASSERT_OK(sgd.Step());
  }
}

// DataParallel on k = 1..4 devices trains to the weights of one device.
// k = 1 runs the module itself: bit for bit. k > 1 sums the replicas'
// weight gradients (one partial GEMM sum per chunk) where one device sums
// all 7 rows in one GEMM: the same terms in another order, so each step
// differs by a few ulps of the gradient (|g| < 10, f64 eps 2.2e-16, at most
// 7 terms per sum: < 1e-14); 4 steps with momentum stay far below 1e-11.
TEST_F(DataParallelTest, MatchesOneDeviceTraining) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> reference,
                                 MakeModel());
  TANDEM_NN_ASSERT_OK(reference->To(Device::Sim(0)));
  Train(*reference, *reference, 4);
  for (int k = 1; k <= 4; ++k) {
    SCOPED_TRACE("k = " + std::to_string(k));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> model,
                                   MakeModel());
    TANDEM_NN_ASSERT_OK(model->To(Device::Sim(0)));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<DataParallel> dp,
        DataParallel::Create(std::move(model), [] { return MakeModel(); },
                             {.device_ids = SimDevices(k)}));
    Train(*dp, *dp, 4);
    EXPECT_EQ(dp->last_replica_count(), k == 4 ? 4 : k);
    const std::vector<Tensor> want = reference->Parameters();
    const std::vector<Tensor> got = dp->module().Parameters();
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor a, want[i].To(Device::CPU()));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor b, got[i].To(Device::CPU()));
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> av,
                                     a.ToVector<double>());
      TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> bv,
                                     b.ToVector<double>());
      if (k == 1) {
        EXPECT_EQ(av, bv) << "parameter " << i;
        continue;
      }
      for (size_t j = 0; j < av.size(); ++j) {
        EXPECT_NEAR(av[j], bv[j], 1e-11)
            << "parameter " << i << "[" << j << "]";
      }
    }
  }
}

TEST_F(DataParallelTest, StateDictNamesArePyTorchs) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> model,
                                 MakeModel());
  TANDEM_NN_ASSERT_OK(model->To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DataParallel> dp,
      DataParallel::Create(std::move(model), [] { return MakeModel(); },
                           {.device_ids = SimDevices(2)}));
  EXPECT_EQ(dp->NamedParameters()[0].name, "module.0.weight");
}

// The counters show the scatter (input rows to sim:1), the replication
// (every parameter to sim:1) and the gather (sim:1's output rows to sim:0),
// and in backward the same three the other way round.
TEST_F(DataParallelTest, CopyCountersShowScatterReplicateGather) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> model,
                                 MakeModel());
  TANDEM_NN_ASSERT_OK(model->To(Device::Sim(0)));
  const int64_t param_bytes = model->NumParameters() * 8;
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DataParallel> dp,
      DataParallel::Create(std::move(model), [] { return MakeModel(); },
                           {.device_ids = SimDevices(2)}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Batch(6, kIn, 1, Device::Sim(0)));
  TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
  ResetSimCopyCounters();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, dp->Forward(x));
  const Device s0 = Device::Sim(0), s1 = Device::Sim(1);
  EXPECT_EQ(SimCopiedBytes(s0, s1), 3 * kIn * 8 + param_bytes);
  EXPECT_EQ(SimCopiedBytes(s1, s0), 3 * kOut * 8);
  EXPECT_EQ(SimCopiedBytes(s0, Device::Sim(2)), 0);
  ResetSimCopyCounters();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(y));
  TANDEM_NN_ASSERT_OK(loss.Backward());
  EXPECT_EQ(SimCopiedBytes(s0, s1), 3 * kOut * 8);
  EXPECT_EQ(SimCopiedBytes(s1, s0), 3 * kIn * 8 + param_bytes);
  EXPECT_EQ(x.grad().device(), s0);
}

// torch.chunk: 5 rows on 4 devices are chunks 2, 2, 1; sim:3 gets nothing.
TEST_F(DataParallelTest, FiveRowsOnFourDevicesRunThreeReplicas) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> model,
                                 MakeModel());
  TANDEM_NN_ASSERT_OK(model->To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DataParallel> dp,
      DataParallel::Create(std::move(model), [] { return MakeModel(); },
                           {.device_ids = SimDevices(4)}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Batch(5, kIn, 1, Device::Sim(0)));
  ResetSimCopyCounters();
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, dp->Forward(x));
  EXPECT_EQ(dp->last_replica_count(), 3);
  EXPECT_EQ(y.shape(), (Shape{5, kOut}));
  EXPECT_EQ(SimCopiedBytes(Device::Sim(0), Device::Sim(3)), 0);
  EXPECT_EQ(SimCopiedBytes(Device::Sim(2), Device::Sim(0)), 1 * kOut * 8);
}

TEST_F(DataParallelTest, OutputDeviceIsWhereTheOutputGoes) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> model,
                                 MakeModel());
  TANDEM_NN_ASSERT_OK(model->To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DataParallel> dp,
      DataParallel::Create(
          std::move(model), [] { return MakeModel(); },
          {.device_ids = SimDevices(2), .output_device = Device::Sim(1)}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Batch(4, kIn, 1, Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, dp->Forward(x));
  EXPECT_EQ(y.device(), Device::Sim(1));
}

void ExpectError(const absl::Status& s, absl::StatusCode code,
                 const std::string& phrase) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_NE(s.message().find(phrase), std::string::npos) << s;
}

TEST_F(DataParallelTest, BadUseIsAClearError) {
  auto factory = [] { return MakeModel(); };
  // More devices than exist.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::unique_ptr<nn::Module> m, MakeModel());
  ExpectError(
      DataParallel::Create(std::move(m), factory,
                           {.device_ids = {Device::Sim(0), Device::Sim(4)}})
          .status(),
      absl::StatusCode::kFailedPrecondition,
      "device_ids[1] = sim:4 cannot be used: sim:4 does not exist");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(m, MakeModel());
  ExpectError(
      DataParallel::Create(std::move(m), factory, {.device_ids = {}}).status(),
      absl::StatusCode::kInvalidArgument, "device_ids is empty");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(m, MakeModel());
  ExpectError(
      DataParallel::Create(std::move(m), factory,
                           {.device_ids = {Device::Sim(1), Device::Sim(1)}})
          .status(),
      absl::StatusCode::kInvalidArgument, "are both sim:1");
  // A replica of another architecture.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(m, MakeModel());
  ExpectError(DataParallel::Create(std::move(m), [] { return MakeModel(3); },
                                   {.device_ids = SimDevices(2)})
                  .status(),
              absl::StatusCode::kInvalidArgument,
              "has parameters '0.weight' f64[16, 3] where the module has "
              "'0.weight' f64[16, 10]");
  // The module left on the CPU.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(m, MakeModel());
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DataParallel> on_cpu,
      DataParallel::Create(std::move(m), factory,
                           {.device_ids = SimDevices(2)}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Batch(4, kIn, 1, Device::Sim(0)));
  ExpectError(on_cpu->Forward(x).status(),
              absl::StatusCode::kFailedPrecondition,
              "module must have its parameters and buffers on device sim:0 "
              "(device_ids[0]) but found one of them on device: cpu");
  // An empty batch, and a replica's own error with its device named.
  TANDEM_NN_ASSERT_OK(on_cpu->module().To(Device::Sim(0)));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      Tensor empty, Tensor::Zeros({0, kIn}, DType::kF64, Device::Sim(0)));
  ExpectError(on_cpu->Forward(empty).status(),
              absl::StatusCode::kInvalidArgument, "at least one row");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor wide,
                                 Batch(4, kIn + 1, 1, Device::Sim(0)));
  ExpectError(on_cpu->Forward(wide).status(),
              absl::StatusCode::kInvalidArgument,
              "DataParallel replica on sim:0: ");
}

}  // namespace
}  // namespace tandem::train
