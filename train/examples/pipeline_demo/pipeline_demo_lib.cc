#include "train/examples/pipeline_demo/pipeline_demo_lib.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "train/parallel/pipeline/pipeline.h"
#include "train/parallel/strategy.h"

namespace tandem::train {
namespace {

constexpr int64_t kFeatures = 8;

// Layers [first, last) of the whole model, weights drawn in order.
absl::StatusOr<std::unique_ptr<nn::Sequential>> StageLayers(
    const PipelineDemoConfig& c, int64_t first, int64_t last) {
  Generator gen(c.seed);
  auto model = std::make_unique<nn::Sequential>();
  for (int64_t l = 0; l < c.layers; ++l) {
    const int64_t in = l == 0 ? kFeatures : c.hidden;
    const int64_t out = l == c.layers - 1 ? 1 : c.hidden;
    TANDEM_ASSIGN_OR_RETURN(auto linear, nn::Linear::Create(in, out, gen));
    if (l < first || l >= last) continue;
    TANDEM_RETURN_IF_ERROR(model->Append(std::move(linear)));
    if (l < c.layers - 1) {
      TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
    }
  }
  return model;
}

// Rows [first, first + rows) of step `step`'s batch: x and its target.
absl::StatusOr<std::pair<Tensor, Tensor>> BatchRows(int64_t step, int64_t first,
                                                    int64_t rows) {
  std::vector<float> x(static_cast<size_t>(rows * kFeatures));
  std::vector<float> y(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < kFeatures; ++j) {
      const double v =
          std::cos(0.37 * static_cast<double>((first + i) * kFeatures + j) +
                   static_cast<double>(step));
      x[static_cast<size_t>(i * kFeatures + j)] = static_cast<float>(v);
      sum += std::sin(v);
    }
    y[static_cast<size_t>(i)] = static_cast<float>(sum / 4);
  }
  TANDEM_ASSIGN_OR_RETURN(Tensor xt, Tensor::FromVector(x, {rows, kFeatures}));
  TANDEM_ASSIGN_OR_RETURN(Tensor yt, Tensor::FromVector(y, {rows, 1}));
  return std::make_pair(xt, yt);
}

}  // namespace

absl::Status RunPipelineDemo(comm::Communicator& comm,
                             const PipelineDemoConfig& c, Device device) {
  TANDEM_RETURN_IF_ERROR(CheckFlagRules(c.RankFlags()));
  TANDEM_ASSIGN_OR_RETURN(const PipelineSchedule schedule,
                          ParsePipelineSchedule(c.schedule));
  const int world = comm.size();
  if (world % c.replicas != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline_demo: the world size (", world,
                     ") must be a multiple of --replicas (", c.replicas,
                     "): world = stages x replicas"));
  }
  const int64_t stages = world / c.replicas;
  if (c.layers < stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline_demo: ", stages, " stages need at least as many layers; ",
        "--layers is ", c.layers));
  }
  if (c.batch_size % c.replicas != 0 || c.batch_size / c.replicas < c.chunks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline_demo: --batch_size (", c.batch_size,
        ") must split evenly over --replicas (", c.replicas,
        ") into shares of at least --chunks (", c.chunks, ") rows"));
  }
  TANDEM_ASSIGN_OR_RETURN(const PipelinePlacement at,
                          PlacePipeline(world, comm.rank(), c.replicas));
  const int64_t first = at.stage * c.layers / stages;
  const int64_t last = (at.stage + 1) * c.layers / stages;
  TANDEM_ASSIGN_OR_RETURN(auto model, StageLayers(c, first, last));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  TANDEM_ASSIGN_OR_RETURN(auto trainer,
                          Strategy::CreatePipeline(comm, *model,
                                                   {.schedule = schedule,
                                                    .chunks = c.chunks,
                                                    .loss = Mse,
                                                    .replicas = c.replicas},
                                                   SgdFactory(c.lr)));
  const comm::RankPrinter printer(comm);
  printer.PrintOnRank0(absl::StrCat(
      "pipeline_demo: ", stages, " stages x ", c.replicas, " replicas, ",
      c.schedule, ", ", c.chunks, " chunks, ", c.layers, " layers"));
  const int64_t share = c.batch_size / c.replicas;
  for (int64_t step = 0; step < c.steps; ++step) {
    TANDEM_ASSIGN_OR_RETURN(auto batch,
                            BatchRows(step, at.replica * share, share));
    TANDEM_ASSIGN_OR_RETURN(Tensor x, batch.first.To(device));
    TANDEM_ASSIGN_OR_RETURN(Tensor t, batch.second.To(device));
    trainer->ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(const double loss, trainer->PipelineStep(x, t));
    TANDEM_RETURN_IF_ERROR(trainer->Step());
    printer.PrintOnRank0(absl::StrFormat("step %d loss %.7f", step, loss));
  }
  return absl::OkStatus();
}

}  // namespace tandem::train
