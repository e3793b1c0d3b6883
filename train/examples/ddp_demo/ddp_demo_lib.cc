#include "train/examples/ddp_demo/ddp_demo_lib.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/cpu/blas.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/conv2d.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/module.h"
#include "tensor/nn/py_repr.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/data/dataset.h"
#include "train/loop/must_match.h"
#include "train/loop/training_loop.h"
#include "train/parallel/strategy.h"

namespace tandem::train {
namespace {

constexpr int64_t kImageSize = 32;
constexpr int64_t kConvOut = 16;

// The script's Model: parameter names "conv2d.weight", "conv2d.bias",
// "fc.weight", "fc.bias", as in PyTorch.
class DemoModel : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<DemoModel>> Create(int64_t num_classes,
                                                           Generator& gen) {
    auto m = std::unique_ptr<DemoModel>(new DemoModel());
    TANDEM_ASSIGN_OR_RETURN(
        m->conv2d_,
        m->RegisterModule(
            "conv2d", nn::Conv2d::Create(3, kConvOut, /*kernel_size=*/3,
                                         /*stride=*/1, /*padding=*/0, gen)));
    const int64_t side = kImageSize - 2;
    TANDEM_ASSIGN_OR_RETURN(
        m->fc_,
        m->RegisterModule("fc", nn::Linear::Create(kConvOut * side * side,
                                                   num_classes, gen)));
    TANDEM_ASSIGN_OR_RETURN(
        m->softmax_,
        m->RegisterModule("softmax", std::make_unique<nn::Softmax>(1)));
    return m;
  }
  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    const int64_t batch = x.dim(0);
    TANDEM_ASSIGN_OR_RETURN(Tensor h, conv2d_->Forward(x));
    TANDEM_ASSIGN_OR_RETURN(h, Reshape(h, {batch, -1}));
    TANDEM_ASSIGN_OR_RETURN(h, fc_->Forward(h));
    return softmax_->Forward(h);
  }
  std::string_view type_name() const override { return "Model"; }

 private:
  DemoModel() = default;
  nn::Conv2d* conv2d_ = nullptr;  // owned by the Module base
  nn::Linear* fc_ = nullptr;
  nn::Softmax* softmax_ = nullptr;
};

// RandomDataset(dataset_size): torch.randn(n, 3, 32, 32) images, labels
// torch.zeros(n, dtype=int).
absl::StatusOr<TensorDataset> RandomDataset(int64_t n, Generator& gen) {
  std::vector<float> images(
      static_cast<size_t>(n * 3 * kImageSize * kImageSize));
  gen.Normal(images.data(), static_cast<int64_t>(images.size()), 0.f, 1.f);
  TANDEM_ASSIGN_OR_RETURN(
      Tensor x, Tensor::FromVector(images, {n, 3, kImageSize, kImageSize}));
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::Zeros({n}, DType::kI64));
  return TensorDataset::Create(x, y);
}

}  // namespace

absl::Status RunDdpDemo(comm::Communicator& comm, const DdpDemoConfig& config,
                        Device device) {
  std::vector<RankFlag> flags =
      WithCheckpointFlags(config.RankFlags(), config.checkpoint);
  for (RankFlag& f : flags) {  // the script's spellings
    if (f.entry.name == "--dataset_size") f.entry.name = "--dataset-size";
    if (f.entry.name == "--num_classes") f.entry.name = "--num-classes";
  }
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(comm, device, "ddp_demo", flags));
  const comm::RankPrinter out(comm);
  // The script's losses bit for bit: PyTorch's GEMM calls (process-wide;
  // every rank sets the same).
  cpu::SetKernelChoice(cpu::KernelChoice::kPyTorch);

  // torch.manual_seed(seed); dataset = RandomDataset(...); model = Model(...)
  Generator gen(config.seed);
  TANDEM_ASSIGN_OR_RETURN(TensorDataset dataset,
                          RandomDataset(config.dataset_size, gen));
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<DemoModel> model,
                          DemoModel::Create(config.num_classes, gen));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(comm, *model, ShardMode::kNone,
                           SgdFactory(0.1, {.momentum = 0.9}),
                           {.who = "ddp_demo",
                            .epochs = config.epochs,
                            .device = device,
                            .checkpoint = config.checkpoint,
                            .must_match = MustMatchOnResume(Entries(flags)),
                            .virtual_world = config.virtual_world}));
  TANDEM_ASSIGN_OR_RETURN(
      SampledBatches data,
      SampledBatches::Create(dataset, comm, config.batchSize,
                             /*drop_last=*/false, config.virtual_world));
  LoopHooks hooks;
  hooks.after_step = [&](const StepView& s) {
    // Rank 0's loss; under --virtual_world, virtual rank 0's.
    if (s.rank == 0)
      out.PrintOnRank0(
          absl::StrCat("Step: ", s.step, ", Loss: ", nn::PyFloatRepr(s.loss)));
    return absl::OkStatus();
  };
  hooks.end_epoch = [&](int64_t epoch, int64_t) -> absl::StatusOr<EpochEnd> {
    return EpochEnd{.report = {.samples = data.total_size()},
                    .rank0_line = absl::StrCat("Epoch ", epoch, " Finished !")};
  };
  return loop->Run(data, CrossEntropyLoss(), hooks);
}

}  // namespace tandem::train
