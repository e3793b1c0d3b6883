#include "bench/predict/predict_lib.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "comm/communicator.h"
#include "sim/clock.h"
#include "sim/cost/topology.h"
#include "sim/options.h"
#include "sim/sim.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/activation.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/nn/layers/sequential.h"
#include "tensor/ops.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::bench {
namespace {

constexpr int kGpusPerNode = 8;
constexpr int64_t kMaxLayers = 256;
constexpr int64_t kMaxSteps = 1000;

absl::Status CheckConfig(const PredictConfig& c) {
  if (c.input < 1 || c.hidden < 1 || c.layers < 1 || c.classes < 1 ||
      c.batch < 1 || c.warmup < 0 || c.steps < 1 || c.bucket_cap_mb < 1 ||
      !(c.compute_scale >= 0) || c.world_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: need input, hidden, layers, classes, batch, steps, "
        "bucket_cap_mb >= 1, warmup >= 0, compute_scale >= 0 and "
        "world_size >= 0; found input=",
        c.input, " hidden=", c.hidden, " layers=", c.layers,
        " classes=", c.classes, " batch=", c.batch, " steps=", c.steps,
        " bucket_cap_mb=", c.bucket_cap_mb, " warmup=", c.warmup,
        " compute_scale=", c.compute_scale, " world_size=", c.world_size));
  }
  // Upper bounds a prediction needs, so a typo fails at once instead of
  // building a model for hours: layers and steps are each a loop.
  if (c.layers > kMaxLayers || c.warmup > kMaxSteps || c.steps > kMaxSteps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: need layers <= ", kMaxLayers,
        " and warmup, steps <= ", kMaxSteps, "; found layers=", c.layers,
        " warmup=", c.warmup, " steps=", c.steps));
  }
  return absl::OkStatus();
}

absl::StatusOr<sim::cost::Topology> TopologyFor(const PredictConfig& c) {
  TANDEM_ASSIGN_OR_RETURN(
      sim::cost::Topology t,
      sim::cost::MakeTopology(c.preset, c.nodes, c.nics_per_node, c.nic_gbps));
  if (c.world_size == 0 || c.world_size == t.world_size()) return t;
  if (c.nodes == 1 && c.world_size < kGpusPerNode) {
    t.gpus_per_node = c.world_size;
    return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "predict: --world_size=", c.world_size, " does not fit ",
      sim::cost::Describe(t), " (", t.world_size(),
      " GPUs); use --world_size=0 (every GPU), fewer than 8 ranks on one "
      "node, or --nodes=",
      (c.world_size + kGpusPerNode - 1) / kGpusPerNode));
}

absl::StatusOr<std::unique_ptr<nn::Sequential>> BuildMlp(
    const PredictConfig& c) {
  Generator gen(1234);  // the same weights on every rank
  auto model = std::make_unique<nn::Sequential>();
  int64_t in = c.input;
  for (int64_t l = 0; l < c.layers; ++l) {
    TANDEM_RETURN_IF_ERROR(
        model->Append(nn::Linear::Create(in, c.hidden, gen)));
    TANDEM_RETURN_IF_ERROR(model->Append(std::make_unique<nn::ReLU>()));
    in = c.hidden;
  }
  TANDEM_RETURN_IF_ERROR(model->Append(nn::Linear::Create(in, c.classes, gen)));
  return model;
}

struct RankOutcome {
  sim::ClockReading delta;  // over the measured steps
  int64_t parameters = 0;
};

absl::StatusOr<RankOutcome> RunRank(comm::Communicator& comm,
                                    const PredictConfig& c) {
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Sequential> model, BuildMlp(c));
  Generator data_gen(1000 + comm.rank());
  TANDEM_ASSIGN_OR_RETURN(Tensor x, Tensor::Empty({c.batch, c.input}));
  data_gen.Normal(x.data<float>(), x.numel(), 0.f, 1.f);
  std::vector<int64_t> labels(c.batch);
  for (int64_t& l : labels)
    l = static_cast<int64_t>(data_gen.Random() % c.classes);
  TANDEM_ASSIGN_OR_RETURN(Tensor y, Tensor::FromVector(labels));
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(model->Parameters(), 0.01));
  train::DdpOptions options;
  options.bucket_cap_bytes = c.bucket_cap_mb << 20;
  options.overlap = c.overlap;
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<train::DistributedDataParallel> ddp,
      train::DistributedDataParallel::Create(*model, comm, options));
  auto step = [&]() -> absl::Status {
    TANDEM_ASSIGN_OR_RETURN(Tensor logits, ddp->Forward(x));
    TANDEM_ASSIGN_OR_RETURN(Tensor loss, CrossEntropy(logits, y));
    model->ZeroGrad();
    TANDEM_RETURN_IF_ERROR(ddp->Backward(loss));
    return sgd.Step();
  };
  for (int64_t s = 0; s < c.warmup; ++s) TANDEM_RETURN_IF_ERROR(step());
  std::optional<sim::ClockReading> start = sim::ReadClock(comm);
  if (!start.has_value()) {
    return absl::InternalError("predict: the network clock is off");
  }
  for (int64_t s = 0; s < c.steps; ++s) TANDEM_RETURN_IF_ERROR(step());
  const sim::ClockReading end = *sim::ReadClock(comm);
  RankOutcome out;
  out.delta.now_s = end.now_s - start->now_s;
  out.delta.compute_s = end.compute_s - start->compute_s;
  out.delta.exposed_comm_s = end.exposed_comm_s - start->exposed_comm_s;
  out.delta.comm_s = end.comm_s - start->comm_s;
  out.delta.operations = end.operations - start->operations;
  for (const Tensor& p : model->Parameters()) out.parameters += p.numel();
  return out;
}

}  // namespace

absl::StatusOr<Prediction> Predict(const PredictConfig& config) {
  TANDEM_RETURN_IF_ERROR(CheckConfig(config));
  TANDEM_ASSIGN_OR_RETURN(sim::cost::Topology topology, TopologyFor(config));
  const int world = topology.world_size();
  if (world > sim::kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("predict: ", world,
                     " ranks; the simulated cluster runs "
                     "at most ",
                     sim::kMaxWorldSize));
  }
  sim::Options options;
  options.clock = sim::ClockOptions{topology, config.algorithm,
                                    config.compute_scale, config.memory_scale};
  std::vector<RankOutcome> outcomes(world);
  sim::RunResult run = sim::Run(
      world,
      [&](int rank, comm::Communicator& comm) -> absl::Status {
        TANDEM_ASSIGN_OR_RETURN(outcomes[rank], RunRank(comm, config));
        return absl::OkStatus();
      },
      options);
  TANDEM_RETURN_IF_ERROR(run.status());
  // The slowest rank sets the step time.
  const RankOutcome* slowest = &outcomes[0];
  for (const RankOutcome& o : outcomes) {
    if (o.delta.now_s > slowest->delta.now_s) slowest = &o;
  }
  Prediction p;
  p.topology = sim::cost::Describe(topology);
  p.world_size = world;
  p.parameters = slowest->parameters;
  const double steps = static_cast<double>(config.steps);
  p.step_s = slowest->delta.now_s / steps;
  p.compute_s = slowest->delta.compute_s / steps;
  p.exposed_comm_s = slowest->delta.exposed_comm_s / steps;
  p.comm_s = slowest->delta.comm_s / steps;
  return p;
}

absl::StatusOr<DeviceProfile> DeviceProfileFor(absl::string_view device) {
  double device_gflops = 0;
  double device_gbps = 0;
  if (device == "host") return DeviceProfile{};
  if (device == "a100") {
    device_gflops = 19.5e3;
    device_gbps = 2039;
  } else if (device == "h100") {
    device_gflops = 67e3;
    device_gbps = 3350;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "predict: unknown device '", device, "'; expected host, a100 or h100"));
  }
  constexpr int64_t n = 512;
  TANDEM_ASSIGN_OR_RETURN(Tensor a, Tensor::Full({n, n}, 0.5));
  TANDEM_ASSIGN_OR_RETURN(Tensor b, Tensor::Full({n, n}, 0.25));
  TANDEM_RETURN_IF_ERROR(MatMul(a, b).status());  // warm up
  constexpr int kReps = 4;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) TANDEM_RETURN_IF_ERROR(MatMul(a, b).status());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  DeviceProfile p;
  p.host_gflops = kReps * 2.0 * n * n * n / seconds / 1e9;
  // Memory: copy 64 MiB (larger than the caches) a few times; a copy reads
  // and writes every byte.
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<char> from(kBytes, 1), to(kBytes, 0);
  std::memcpy(to.data(), from.data(), kBytes);  // warm up (fault the pages)
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < kReps; ++i) {
    from[static_cast<size_t>(i)] = static_cast<char>(i);  // not hoisted
    std::memcpy(to.data(), from.data(), kBytes);
  }
  seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  p.host_gbps = kReps * 2.0 * static_cast<double>(kBytes) / seconds / 1e9;
  p.compute_scale = p.host_gflops / device_gflops;
  p.memory_scale = p.host_gbps / device_gbps;
  return p;
}

std::string TableHeader() {
  return absl::StrFormat("%6s %12s %12s %12s %12s %8s\n", "ranks", "step_ms",
                         "compute_ms", "exposed_ms", "comm_ms", "eff");
}

std::string FormatRow(const Prediction& p) {
  return absl::StrFormat("%6d %12.4f %12.4f %12.4f %12.4f %7.1f%%\n",
                         p.world_size, p.step_s * 1e3, p.compute_s * 1e3,
                         p.exposed_comm_s * 1e3, p.comm_s * 1e3,
                         100 * p.efficiency());
}

}  // namespace tandem::bench
