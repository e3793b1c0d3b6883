#include "bench/pipeline_bubble.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "sim/cost/topology.h"
#include "sim/sim.h"
#include "tensor/autograd/autograd.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/nn/module.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem::bench {
namespace {

using train::PipelineStage;

constexpr int64_t kWidth = 4;  // the bubble model's Linear, width x width

// A network with no latency and (practically) unbounded bandwidth: the
// pipeline's messages and its agreement all-gather cost nothing, so what
// the clock shows beyond compute is the schedule's idle time.
sim::cost::Topology IdealNetwork(int ranks) {
  sim::cost::Topology t;
  t.name = "ideal";
  t.gpus_per_node = ranks;
  t.nodes = 1;
  t.intra.peak_gbytes_per_s = 1e12;
  t.intra.efficiency = 1;
  t.intra.latency_us = 0;
  t.base_latency_us = 0;
  return t;
}

// A Linear whose forward charges `forward_s` and whose backward charges
// `backward_s` to the rank's network clock.
class ClockedLinear : public nn::Module {
 public:
  static absl::StatusOr<std::unique_ptr<ClockedLinear>> Create(
      comm::Communicator& comm, double forward_s, double backward_s) {
    auto m = std::unique_ptr<ClockedLinear>(
        new ClockedLinear(comm, forward_s, backward_s));
    Generator gen(7);
    TANDEM_ASSIGN_OR_RETURN(
        m->linear_, m->RegisterModule<nn::Linear>(
                        "linear", nn::Linear::Create(kWidth, kWidth, gen)));
    return m;
  }

  absl::StatusOr<Tensor> Forward(const Tensor& x) override {
    TANDEM_ASSIGN_OR_RETURN(Tensor h, linear_->Forward(x));
    sim::AdvanceClock(comm_, forward_s_);
    Tensor y;
    {
      NoGradGuard no_grad;
      TANDEM_ASSIGN_OR_RETURN(y, h.Clone());
    }
    comm::Communicator* comm = &comm_;
    const double backward_s = backward_s_;
    RecordOp(
        "ClockedBackward", y, {h},
        [comm, backward_s](const Tensor& g, GradSink& sink) -> absl::Status {
          sim::AdvanceClock(*comm, backward_s);
          return sink.Add(0, g);
        });
    return y;
  }
  std::string_view type_name() const override { return "ClockedLinear"; }

 private:
  ClockedLinear(comm::Communicator& comm, double forward_s, double backward_s)
      : comm_(comm), forward_s_(forward_s), backward_s_(backward_s) {}

  comm::Communicator& comm_;
  const double forward_s_;
  const double backward_s_;
  nn::Linear* linear_ = nullptr;
};

absl::StatusOr<Tensor> SumLoss(const Tensor& y, const Tensor&) {
  return Sum(y);
}

absl::Status CheckStages(int stages, int64_t micro_batches) {
  if (stages < 1 || stages > 64 || micro_batches < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the pipeline needs 1 to 64 stages and >= 1 micro-batches, got ",
        stages, " stages and ", micro_batches, " micro-batches"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BubbleResult> MeasureBubble(const BubbleCase& c) {
  TANDEM_RETURN_IF_ERROR(CheckStages(c.stages, c.micro_batches));
  sim::Options options;
  options.timeout = absl::Minutes(1);
  options.clock = sim::ClockOptions{IdealNetwork(c.stages)};
  options.clock->compute_scale = 0;  // only the charged times count
  sim::RunResult run = sim::Run(
      c.stages,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(
            auto model, ClockedLinear::Create(comm, c.forward_s, c.backward_s));
        TANDEM_ASSIGN_OR_RETURN(
            auto stage,
            PipelineStage::Create(
                comm, *model,
                {.schedule = c.schedule, .chunks = c.micro_batches}, SumLoss));
        Tensor x, t;
        TANDEM_ASSIGN_OR_RETURN(
            x, Tensor::Ones({c.micro_batches, kWidth}, DType::kF32));
        t = x;
        return stage
            ->Step(rank == 0 ? x : Tensor(),
                   rank == c.stages - 1 ? t : Tensor())
            .status();
      },
      options);
  TANDEM_RETURN_IF_ERROR(run.status());
  BubbleResult r;
  for (const sim::ClockReading& clock : run.clocks) {
    r.step_s = std::max(r.step_s, clock.now_s);
  }
  r.compute_s =
      static_cast<double>(c.micro_batches) * (c.forward_s + c.backward_s);
  r.bubble = 1 - r.compute_s / r.step_s;
  r.predicted = static_cast<double>(c.stages - 1) /
                static_cast<double>(c.micro_batches + c.stages - 1);
  return r;
}

absl::StatusOr<ThroughputResult> MeasureThroughput(const ThroughputCase& c) {
  TANDEM_RETURN_IF_ERROR(CheckStages(c.stages, c.micro_batches));
  if (c.batch < c.micro_batches || c.steps < 1 || c.width < 1 ||
      c.layers_per_stage < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "throughput case: batch (", c.batch, ") must be >= micro-batches (",
        c.micro_batches, "), steps, width and layers per stage >= 1"));
  }
  sim::Options options;
  options.timeout = absl::Minutes(5);
  options.clock = sim::ClockOptions{IdealNetwork(c.stages)};
  options.clock->compute_scale = 1;  // this host's thread CPU time
  std::vector<sim::ClockReading> start(c.stages), end(c.stages);
  sim::RunResult run = sim::Run(
      c.stages,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        Generator gen(static_cast<uint64_t>(rank) + 1);
        nn::Sequential model;
        for (int64_t l = 0; l < c.layers_per_stage; ++l) {
          TANDEM_RETURN_IF_ERROR(
              model.Append(nn::Linear::Create(c.width, c.width, gen)));
          TANDEM_RETURN_IF_ERROR(model.Append(std::make_unique<nn::ReLU>()));
        }
        TANDEM_ASSIGN_OR_RETURN(
            auto stage,
            PipelineStage::Create(
                comm, model,
                {.schedule = c.schedule, .chunks = c.micro_batches},
                [](const Tensor& y, const Tensor& t) { return Mse(y, t); }));
        TANDEM_ASSIGN_OR_RETURN(
            Tensor x, Tensor::Full({c.batch, c.width}, 0.5, DType::kF32));
        for (int64_t step = 0; step <= c.steps; ++step) {
          if (step == 1) start[rank] = *sim::ReadClock(comm);
          model.ZeroGrad();
          TANDEM_RETURN_IF_ERROR(stage
                                     ->Step(rank == 0 ? x : Tensor(),
                                            rank == c.stages - 1 ? x : Tensor())
                                     .status());
        }
        end[rank] = *sim::ReadClock(comm);
        return absl::OkStatus();
      },
      options);
  TANDEM_RETURN_IF_ERROR(run.status());
  double first = 0, last = 0;
  ThroughputResult r;
  for (int i = 0; i < c.stages; ++i) {
    first = std::max(first, start[i].now_s);
    last = std::max(last, end[i].now_s);
    r.busiest_compute_s =
        std::max(r.busiest_compute_s, (end[i].compute_s - start[i].compute_s) /
                                          static_cast<double>(c.steps));
  }
  r.step_s = (last - first) / static_cast<double>(c.steps);
  r.samples_per_s = static_cast<double>(c.batch) / r.step_s;
  r.bubble = 1 - r.busiest_compute_s / r.step_s;
  r.predicted = static_cast<double>(c.stages - 1) /
                static_cast<double>(c.micro_batches + c.stages - 1);
  return r;
}

}  // namespace tandem::bench
