#include "train/examples/amp_ddp/amp_ddp_lib.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/amp/autocast.h"
#include "tensor/generator.h"
#include "tensor/nn/layers/linear.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"
#include "train/loop/must_match.h"
#include "train/loop/training_loop.h"
#include "train/loop/virtual_rank_printer.h"
#include "train/parallel/ddp/comm_hook.h"

namespace tandem::train {
namespace {

constexpr int64_t kFeatures = 10;

// Each rank draws its own inputs and targets, step after step, from one
// generator of its own (seed + 1000 + rank; under --virtual_world one per
// virtual rank, seeded by the virtual rank); a resumed run replays the
// draws of the steps already taken, so step k sees the batch it would have
// seen.
class RandomBatches : public EpochBatches {
 public:
  RandomBatches(uint64_t seed, const VirtualWorld& vw, int64_t rows,
                int64_t steps)
      : rows_(rows), steps_(steps) {
    for (int64_t v = 0; v < vw.local; ++v) {
      streams_.push_back(
          {Generator(seed + static_cast<uint64_t>(vw.rank_of(v))), 0});
    }
  }
  absl::StatusOr<int64_t> BeginEpoch(int64_t) override { return steps_; }
  absl::StatusOr<Batch> GetBatch(int64_t step) override {
    return GetReplicaBatch(step, 0);
  }
  int64_t replicas() const override {
    return static_cast<int64_t>(streams_.size());
  }
  absl::StatusOr<Batch> GetReplicaBatch(int64_t step, int64_t v) override {
    Stream& s = streams_[v];
    Batch batch;
    for (; s.drawn <= step; ++s.drawn) {
      TANDEM_ASSIGN_OR_RETURN(batch.features, Draw(s.gen));
      TANDEM_ASSIGN_OR_RETURN(batch.labels, Draw(s.gen));
    }
    return batch;
  }

 private:
  struct Stream {
    Generator gen;
    int64_t drawn = 0;
  };
  absl::StatusOr<Tensor> Draw(Generator& gen) {
    std::vector<float> values(static_cast<size_t>(rows_ * kFeatures));
    gen.Normal(values.data(), static_cast<int64_t>(values.size()), 0.f, 1.f);
    return Tensor::FromVector<float>(values, {rows_, kFeatures});
  }
  std::vector<Stream> streams_;
  int64_t rows_;
  int64_t steps_;
};

}  // namespace

absl::StatusOr<std::optional<InjectInf>> ParseInjectInfFlag(
    const std::string& value) {
  if (value.empty()) return std::optional<InjectInf>();
  const std::vector<std::string> parts = absl::StrSplit(value, ':');
  InjectInf inject;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &inject.rank) ||
      !absl::SimpleAtoi(parts[1], &inject.step) || inject.rank < 0 ||
      inject.step < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--inject_inf=", value,
        "; expected RANK:STEP with both >= 0 (steps count from 0), e.g. 1:3"));
  }
  return std::optional<InjectInf>(inject);
}

absl::Status RunAmpDdp(comm::Communicator& comm, const AmpDdpConfig& config,
                       Device device) {
  const std::vector<RankFlag> flags =
      WithCheckpointFlags(config.RankFlags(), config.checkpoint);
  TANDEM_RETURN_IF_ERROR(CheckRankFlags(comm, device, "amp_ddp", flags));
  TANDEM_ASSIGN_OR_RETURN(const std::optional<InjectInf> inject,
                          ParseInjectInfFlag(config.inject_inf));
  // Under --virtual_world, ranks are virtual ranks.
  const int64_t ranks =
      config.virtual_world > 0 ? config.virtual_world : comm.size();
  if (inject.has_value() && inject->rank >= ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "amp_ddp: --inject_inf names rank ", inject->rank,
        " but the world has ", ranks, " ranks (0..", ranks - 1, ")"));
  }
  // --amp=off: f32, the scaler disabled.
  const std::optional<DType> autocast = AutocastDType(config.amp);
  if (autocast.has_value()) {
    TANDEM_RETURN_IF_ERROR(amp::Autocast::Check(device.type(), *autocast));
  }
  Generator init(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Linear> model,
                          nn::Linear::Create(kFeatures, kFeatures, init));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  // One epoch of config.steps steps; the scaler is enabled unless amp is
  // off, and its state rides in every checkpoint.
  // Field by field: GCC 12 -O2 warns falsely (maybe-uninitialized) on
  // nested designated initialisers.
  LoopOptions options;
  options.who = "amp_ddp";
  options.epochs = 1;
  options.device = device;
  options.checkpoint = config.checkpoint;
  options.autocast = autocast;
  options.grad_scaler =
      optim::GradScalerOptions{.enabled = autocast.has_value()};
  options.must_match = MustMatchOnResume(Entries(flags));
  options.virtual_world = config.virtual_world;
  StrategyOptions strategy;
  // A known name: CheckRankFlags checked --comm_hook's rule.
  strategy.comm_hook = *DdpCommHookFromName(config.comm_hook.c_str());
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<TrainingLoop> loop,
      TrainingLoop::Create(comm, *model, ShardMode::kNone,
                           SgdFactory(config.lr), std::move(options),
                           std::move(strategy)));
  const VirtualWorld& vw = loop->strategy().virtual_world();
  VirtualRankPrinter& printer = loop->printer();
  RandomBatches data(config.seed + 1000, vw, config.batch_size, config.steps);
  LoopHooks hooks;
  hooks.before_optimizer_step = [&](const StepView& s) -> absl::Status {
    // Once per step, after the reduction: the rank that plays the named
    // (virtual) rank injects.
    if (!inject.has_value() || inject->step != s.step ||
        inject->rank < vw.first || inject->rank >= vw.first + vw.local) {
      return absl::OkStatus();
    }
    // One element of this rank's (already all-reduced) weight gradient.
    const Tensor grad = model->NamedParameters()[0].tensor.grad();
    TANDEM_ASSIGN_OR_RETURN(Tensor host, grad.To(Device::CPU()));
    host.data<float>()[0] = std::numeric_limits<float>::infinity();
    if (!grad.SharesStorageWith(host)) {
      TANDEM_RETURN_IF_ERROR(grad.CopyFrom(host));
    }
    return absl::OkStatus();
  };
  hooks.after_checked_step = [&](const StepView& s) {
    return printer.PrintOnRank(
        s.rank,
        absl::StrFormat("step %03d | loss %.7f | scale %g | %s", s.step, s.loss,
                        s.loss_scale, s.skipped ? "skipped" : "stepped"));
  };
  TANDEM_RETURN_IF_ERROR(loop->Run(data, Mse, hooks));
  double checksum = 0;
  for (const nn::NamedTensor& p : model->NamedParameters()) {
    TANDEM_ASSIGN_OR_RETURN(Tensor host, p.tensor.To(Device::CPU()));
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, host.ToVector<float>());
    for (float x : v) checksum += x;
  }
  for (int64_t v = 0; v < vw.local; ++v) {
    TANDEM_RETURN_IF_ERROR(printer.PrintOnRank(
        vw.rank_of(v), absl::StrFormat("weights checksum %.10f", checksum)));
  }
  return printer.Flush();
}

}  // namespace tandem::train
