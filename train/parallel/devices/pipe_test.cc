#include "train/parallel/devices/pipe.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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

constexpr int64_t kIn = 10, kHidden = 32, kOut = 5;

// Linear, ReLU, Linear, ReLU, Linear; layer l goes to devices[l] (nullopt:
// stays on the CPU).
absl::StatusOr<std::unique_ptr<nn::Sequential>> MakeModel(
    const std::vector<Device>& devices, int64_t second_in = kHidden) {
  Generator gen(5);
  nn::Linear::Options f64;
  f64.dtype = DType::kF64;
  auto m = std::make_unique<nn::Sequential>();
  absl::Status s = m->Append(nn::Linear::Create(kIn, kHidden, gen, f64));
  if (s.ok()) s = m->Append(std::make_unique<nn::ReLU>());
  if (s.ok()) s = m->Append(nn::Linear::Create(second_in, kHidden, gen, f64));
  if (s.ok()) s = m->Append(std::make_unique<nn::ReLU>());
  if (s.ok()) s = m->Append(nn::Linear::Create(kHidden, kOut, gen, f64));
  for (int64_t l = 0; s.ok() && l < m->size(); ++l) {
    s = m->at(l)->To(devices[static_cast<size_t>(l)]);
  }
  if (!s.ok()) return s;
  return m;
}

const std::vector<Device> kOneDevice(5, Device::Sim(0));
const std::vector<Device> kThreeStages = {Device::Sim(0), Device::Sim(0),
                                          Device::Sim(1), Device::Sim(1),
                                          Device::Sim(2)};

absl::StatusOr<Tensor> Batch(int64_t rows, int64_t cols, double scale,
                             Device device) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = scale * std::cos(0.29 * static_cast<double>(i) + scale);
  }
  absl::StatusOr<Tensor> t = Tensor::FromVector(v, {rows, cols});
  if (!t.ok()) return t.status();
  return t->To(device);
}

class PipeTest : public ::testing::Test {
 protected:
  void SetUp() override { TANDEM_NN_ASSERT_OK(InstallSimDevices(3)); }
};

// Three SGD steps on `rows`-row batches; returns the parameters on the CPU.
void Train(nn::Module& model, Device out_device, int64_t rows,
           std::vector<std::vector<double>>& params, Tensor* input_grad) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      optim::Sgd sgd, optim::Sgd::Create(model.Parameters(), 0.05,
                                         optim::SgdOptions{.momentum = 0.9}));
  for (int step = 0; step < 3; ++step) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        Tensor x, Batch(rows, kIn, 1.0 + step, Device::Sim(0)));
    TANDEM_NN_ASSERT_OK(x.set_requires_grad(true));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor t,
                                   Batch(rows, kOut, 0.3 + step, out_device));
    model.ZeroGrad();
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, model.Forward(x));
    ASSERT_EQ(y.device(), out_device);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Mse(y, t));
    TANDEM_NN_ASSERT_OK(loss.Backward());
    TANDEM_NN_ASSERT_OK(sgd.Step());
    if (input_grad != nullptr) *input_grad = x.grad();
  }
  params.clear();
  for (const Tensor& p : model.Parameters()) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor h, p.To(Device::CPU()));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(std::vector<double> v, h.ToVector<double>());
    params.push_back(std::move(v));
  }
}

TEST(GpipeClockCyclesTest, IsTorchgpipesSchedule) {
  using Cycle = std::vector<std::pair<int64_t, int64_t>>;
  const auto cycles = GpipeClockCycles(3, 2);
  ASSERT_EQ(cycles.size(), 4u);
  EXPECT_EQ(cycles[0], (Cycle{{0, 0}}));
  EXPECT_EQ(cycles[1], (Cycle{{1, 0}, {0, 1}}));
  EXPECT_EQ(cycles[2], (Cycle{{2, 0}, {1, 1}}));
  EXPECT_EQ(cycles[3], (Cycle{{2, 1}}));
}

TEST_F(PipeTest, SplitsStagesByDevice) {
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto seq, MakeModel(kThreeStages));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto pipe,
                                 Pipe::Create(std::move(seq), {.chunks = 2}));
  ASSERT_EQ(pipe->stages().size(), 3u);
  EXPECT_EQ(pipe->stages()[1].device, Device::Sim(1));
  EXPECT_EQ(pipe->stages()[1].first_layer, 2);
  EXPECT_EQ(pipe->stages()[1].num_layers, 2);
}

// Pipe equals the unsplit model on one device: bit for bit with one chunk;
// with several, each parameter gradient is a sum over micro-batches where
// the unsplit model has one GEMM over all rows (same terms, other order:
// a few ulps of |g| < 10 in f64, far below 1e-11 after three steps). Every
// checkpoint mode gives the same bits (recomputation is the same
// arithmetic). Batches of 8 and 7 rows (7 on 4 chunks: 2, 2, 2, 1).
TEST_F(PipeTest, MatchesTheUnsplitModel) {
  for (int64_t rows : {8, 7}) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto reference, MakeModel(kOneDevice));
    std::vector<std::vector<double>> want;
    Tensor want_input_grad;
    Train(*reference, Device::Sim(0), rows, want, &want_input_grad);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor wig,
                                   want_input_grad.To(Device::CPU()));
    for (int64_t chunks : {1, 2, 4}) {
      std::vector<std::vector<double>> by_mode[3];
      int mode_index = 0;
      for (PipeCheckpoint mode :
           {PipeCheckpoint::kNever, PipeCheckpoint::kExceptLast,
            PipeCheckpoint::kAlways}) {
        SCOPED_TRACE(absl::StrCat("rows ", rows, " chunks ", chunks, " ",
                                  std::string(PipeCheckpointName(mode))));
        TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto seq, MakeModel(kThreeStages));
        TANDEM_NN_ASSERT_OK_AND_ASSIGN(
            auto pipe, Pipe::Create(std::move(seq),
                                    {.chunks = chunks, .checkpoint = mode}));
        std::vector<std::vector<double>> got;
        Tensor input_grad;
        Train(*pipe, Device::Sim(2), rows, got, &input_grad);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_TRUE(input_grad.defined());
        EXPECT_EQ(input_grad.device(), Device::Sim(0));
        TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor ig, input_grad.To(Device::CPU()));
        for (size_t p = 0; p < want.size(); ++p) {
          if (chunks == 1) {
            EXPECT_EQ(got[p], want[p]) << "parameter " << p;
            continue;
          }
          for (size_t e = 0; e < want[p].size(); ++e) {
            ASSERT_NEAR(got[p][e], want[p][e], 1e-11)
                << "parameter " << p << "[" << e << "]";
          }
        }
        const std::vector<double> a = wig.ToVector<double>().value();
        const std::vector<double> b = ig.ToVector<double>().value();
        for (size_t e = 0; e < a.size(); ++e) {
          ASSERT_NEAR(a[e], b[e], 1e-12) << "input grad [" << e << "]";
        }
        by_mode[mode_index++] = std::move(got);
      }
      EXPECT_EQ(by_mode[0], by_mode[1]);
      EXPECT_EQ(by_mode[0], by_mode[2]);
    }
  }
}

// Checkpointing keeps less alive between forward and backward: measured as
// the bytes live on the stage devices right after Forward.
TEST_F(PipeTest, CheckpointingSavesMemory) {
  int64_t live[3];
  int index = 0;
  for (PipeCheckpoint mode :
       {PipeCheckpoint::kNever, PipeCheckpoint::kExceptLast,
        PipeCheckpoint::kAlways}) {
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto seq, MakeModel(kThreeStages));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(
        auto pipe,
        Pipe::Create(std::move(seq), {.chunks = 4, .checkpoint = mode}));
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Batch(64, kIn, 1, Device::Sim(0)));
    int64_t before = 0;
    for (int d = 0; d < 3; ++d) before += SimMemoryAllocated(d);
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor y, pipe->Forward(x));
    int64_t after = 0;
    for (int d = 0; d < 3; ++d) after += SimMemoryAllocated(d);
    live[index++] = after - before;
    TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor loss, Sum(y));
    TANDEM_NN_ASSERT_OK(loss.Backward());
  }
  EXPECT_GT(live[0], live[1]);
  EXPECT_GT(live[1], live[2]);
}

void ExpectError(const absl::Status& s, const std::string& phrase) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(phrase), std::string::npos) << s;
}

TEST_F(PipeTest, BadInputIsAClearError) {
  Generator gen(1);
  ExpectError(Pipe::Create(nn::Linear::Create(2, 2, gen).value(), {}).status(),
              "Pipe needs an nn::Sequential whose layers sit on their "
              "devices, got Linear");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto seq, MakeModel(kThreeStages));
  ExpectError(Pipe::Create(std::move(seq), {.chunks = 0}).status(),
              "chunks must be >= 1, got 0");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(
      seq, MakeModel({Device::Sim(0), Device::Sim(0), Device::Sim(1),
                      Device::Sim(1), Device::Sim(0)}));
  ExpectError(Pipe::Create(std::move(seq), {}).status(),
              "stages not in device order: layer 4 (Linear) is on sim:0");
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(seq, MakeModel(kThreeStages));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(auto pipe,
                                 Pipe::Create(std::move(seq), {.chunks = 4}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(Tensor x, Batch(3, kIn, 1, Device::Sim(0)));
  ExpectError(pipe->Forward(x).status(),
              "chunks (4) is larger than the batch (3 rows)");
  // Stage 1 expects 20 features but stage 0 produces 32.
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(seq, MakeModel(kThreeStages, 20));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(pipe,
                                 Pipe::Create(std::move(seq), {.chunks = 2}));
  TANDEM_NN_ASSERT_OK_AND_ASSIGN(x, Batch(4, kIn, 1, Device::Sim(0)));
  ExpectError(pipe->Forward(x).status(),
              "Pipe stage 1 (sim:1, layers 2..3) failed on micro-batch 0 "
              "with input f64[2, 32] (the output of stage 0)");
  EXPECT_EQ(ParsePipeCheckpoint("sometimes").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::train
