#include "train/examples/amp_ddp_lib.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "comm/rank_printer.h"
#include "tensor/amp/autocast.h"
#include "tensor/generator.h"
#include "tensor/nn/linear.h"
#include "tensor/ops.h"
#include "tensor/optim/grad_scaler.h"
#include "tensor/optim/sgd.h"
#include "tensor/tensor.h"
#include "train/checkpoint/training_checkpoint.h"
#include "train/examples/run_monitor.h"
#include "train/launch/config_agreement.h"
#include "train/parallel/core/finite_check.h"
#include "train/parallel/core/found_inf.h"
#include "train/parallel/ddp/ddp.h"

namespace tandem::train {
namespace {

constexpr int64_t kFeatures = 10;

absl::StatusOr<Tensor> RandomBatch(Generator& gen, int64_t rows,
                                   Device device) {
  std::vector<float> values(static_cast<size_t>(rows * kFeatures));
  gen.Normal(values.data(), static_cast<int64_t>(values.size()), 0.f, 1.f);
  TANDEM_ASSIGN_OR_RETURN(Tensor t,
                          Tensor::FromVector<float>(values, {rows, kFeatures}));
  return t.To(device);
}

// The GradScaler's state as checkpoint metadata: the scale as the bits of
// its double (exact) and the growth tracker.
checkpoint::Metadata ScalerStateToExtra(const optim::GradScalerState& s) {
  int64_t bits;
  static_assert(sizeof(bits) == sizeof(s.scale));
  std::memcpy(&bits, &s.scale, sizeof(bits));
  return {{"grad_scaler.scale_bits", absl::StrCat(bits)},
          {"grad_scaler.growth_tracker", absl::StrCat(s.growth_tracker)}};
}

absl::StatusOr<optim::GradScalerState> ScalerStateFromExtra(
    const checkpoint::Metadata& extra) {
  optim::GradScalerState out;
  auto scale = extra.find("grad_scaler.scale_bits");
  auto tracker = extra.find("grad_scaler.growth_tracker");
  int64_t bits = 0;
  if (scale == extra.end() || tracker == extra.end() ||
      !absl::SimpleAtoi(scale->second, &bits) ||
      !absl::SimpleAtoi(tracker->second, &out.growth_tracker)) {
    return absl::InvalidArgumentError(
        "amp_ddp: the checkpoint has no valid GradScaler state "
        "(grad_scaler.scale_bits, grad_scaler.growth_tracker); it was not "
        "written by amp_ddp: start from a fresh --checkpoint_dir");
  }
  std::memcpy(&out.scale, &bits, sizeof(bits));
  return out;
}

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
  const int rank = comm.rank();
  if (config.steps < 1 || config.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("amp_ddp: --steps and --batch_size must be >= 1, got ",
                     config.steps, " and ", config.batch_size));
  }
  const std::string amp_name =
      config.amp.has_value() ? DTypeName(*config.amp) : "off";
  const std::string inject_name =
      config.inject_inf.has_value()
          ? absl::StrCat(config.inject_inf->rank, ":", config.inject_inf->step)
          : "";
  TANDEM_RETURN_IF_ERROR(CheckRanksAgree(
      comm, device,
      {ConfigEntry("--amp", amp_name), ConfigEntry("--steps", config.steps),
       ConfigEntry("--batch_size", config.batch_size),
       ConfigEntry("--lr", config.lr), ConfigEntry("--seed", config.seed),
       ConfigEntry("--comm_hook", DdpCommHookName(config.comm_hook)),
       ConfigEntry("--inject_inf", inject_name),
       ConfigEntry("--checkpoint_dir", config.checkpoint.dir),
       ConfigEntry("--checkpoint_every", config.checkpoint.every_steps)}));
  if (config.inject_inf.has_value() && config.inject_inf->rank >= comm.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("amp_ddp: --inject_inf names rank ",
                     config.inject_inf->rank, " but the world has ",
                     comm.size(), " ranks (0..", comm.size() - 1, ")"));
  }
  if (config.amp.has_value()) {
    TANDEM_RETURN_IF_ERROR(amp::Autocast::Check(device.type(), *config.amp));
  }
  Generator init(config.seed);
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Linear> model,
                          nn::Linear::Create(kFeatures, kFeatures, init));
  TANDEM_RETURN_IF_ERROR(model->To(device));
  DdpOptions options;
  options.comm_hook = config.comm_hook;
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<DistributedDataParallel> ddp,
      DistributedDataParallel::Create(*model, comm, options));
  std::vector<Tensor> params;
  for (const nn::NamedTensor& p : model->NamedParameters()) {
    params.push_back(p.tensor);
  }
  TANDEM_ASSIGN_OR_RETURN(optim::Sgd sgd,
                          optim::Sgd::Create(params, config.lr));
  TANDEM_ASSIGN_OR_RETURN(
      optim::GradScaler scaler,
      optim::GradScaler::Create({.enabled = config.amp.has_value()}));
  scaler.set_found_inf_combiner(FoundInfAcrossRanks(comm, device));
  const comm::RankPrinter printer(comm);
  // Resume (every rank reads the same files): model, Sgd and the scaler.
  checkpoint::RunCheckpointer checkpointer(config.checkpoint, comm, device,
                                           "amp_ddp");
  checkpoint::TrainingState state;
  state.model = model.get();
  state.optimizer = &sgd;
  TANDEM_ASSIGN_OR_RETURN(checkpoint::TrainingProgress start,
                          checkpointer.Resume(state));
  if (start.global_step > 0) {
    TANDEM_ASSIGN_OR_RETURN(optim::GradScalerState saved,
                            ScalerStateFromExtra(state.extra));
    TANDEM_RETURN_IF_ERROR(scaler.LoadStateDict(saved));
  }
  // Each rank draws its own data; a resumed run replays the draws of the
  // steps already taken, so step k sees the batch it would have seen.
  Generator data(config.seed + 1000 + static_cast<uint64_t>(rank));
  const int64_t first_step =
      start.epoch > 0 ? config.steps : start.step_in_epoch;
  for (int64_t step = 0; step < first_step; ++step) {
    TANDEM_RETURN_IF_ERROR(
        RandomBatch(data, config.batch_size, device).status());
    TANDEM_RETURN_IF_ERROR(
        RandomBatch(data, config.batch_size, device).status());
  }
  RunMonitor* const monitor = rank == 0 ? ActiveRunMonitor() : nullptr;
  for (int64_t step = first_step; step < config.steps; ++step) {
    TANDEM_ASSIGN_OR_RETURN(Tensor input,
                            RandomBatch(data, config.batch_size, device));
    TANDEM_ASSIGN_OR_RETURN(Tensor target,
                            RandomBatch(data, config.batch_size, device));
    Tensor loss;
    {
      std::optional<amp::Autocast> autocast;
      if (config.amp.has_value()) autocast.emplace(device.type(), *config.amp);
      TANDEM_ASSIGN_OR_RETURN(Tensor output, ddp->Forward(input));
      TANDEM_ASSIGN_OR_RETURN(loss, Mse(output, target));
    }
    sgd.ZeroGrad();
    TANDEM_ASSIGN_OR_RETURN(Tensor scaled, scaler.Scale(loss));
    TANDEM_RETURN_IF_ERROR(ddp->Backward(scaled));
    if (config.inject_inf.has_value() && config.inject_inf->rank == rank &&
        config.inject_inf->step == step) {
      // One element of this rank's (already all-reduced) weight gradient.
      const Tensor grad = params[0].grad();
      TANDEM_ASSIGN_OR_RETURN(Tensor host, grad.To(Device::CPU()));
      host.data<float>()[0] = std::numeric_limits<float>::infinity();
      if (!grad.SharesStorageWith(host)) {
        TANDEM_RETURN_IF_ERROR(grad.CopyFrom(host));
      }
    }
    const double scale = scaler.scale();
    TANDEM_ASSIGN_OR_RETURN(bool stepped, scaler.Step(sgd));
    TANDEM_RETURN_IF_ERROR(scaler.Update());
    TANDEM_ASSIGN_OR_RETURN(double loss_value, loss.Item());
    TANDEM_RETURN_IF_ERROR(
        CheckStepFinite(comm, *model,
                        {.epoch = 0,
                         .step = step,
                         .loss = loss_value,
                         .outcome = stepped ? StepOutcome::kApplied
                                            : StepOutcome::kSkipped})
            .status());
    printer.PrintOnAllRanks(
        absl::StrFormat("step %03d | loss %.7f | scale %g | %s", step,
                        loss_value, scale, stepped ? "stepped" : "skipped"));
    if (monitor != nullptr) {
      ReportStep(*monitor, *ddp,
                 {.epoch = 0,
                  .epochs = 1,
                  .step = step,
                  .steps_per_epoch = config.steps,
                  .samples = config.batch_size * comm.size(),
                  .loss = loss_value,
                  .loss_scale = scale,
                  .skipped = !stepped});
    }
    state.extra = ScalerStateToExtra(scaler.StateDict());
    TANDEM_RETURN_IF_ERROR(
        checkpointer.AfterStep(state, /*epoch=*/0, step, config.steps));
  }
  double checksum = 0;
  for (const Tensor& p : params) {
    TANDEM_ASSIGN_OR_RETURN(Tensor host, p.To(Device::CPU()));
    TANDEM_ASSIGN_OR_RETURN(std::vector<float> v, host.ToVector<float>());
    for (float x : v) checksum += x;
  }
  printer.PrintOnAllRanks(absl::StrFormat("weights checksum %.10f", checksum));
  return absl::OkStatus();
}

}  // namespace tandem::train
