#include "train/parallel/devices/pipe.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "train/parallel/devices/device_transfer.h"

namespace tandem::train {
namespace {

std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()));
}

// The device of a layer's parameters and buffers; nullopt without any.
absl::StatusOr<std::optional<Device>> LayerDevice(const nn::Module& layer,
                                                  int64_t index) {
  std::optional<Device> device;
  for (const auto& list : {layer.NamedParameters(), layer.NamedBuffers()}) {
    for (const nn::NamedTensor& t : list) {
      if (!device.has_value()) {
        device = t.tensor.device();
      } else if (*device != t.tensor.device()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Pipe: layer ", index, " (", std::string(layer.type_name()),
            ") has '", t.name, "' on ", t.tensor.device().ToString(),
            " but other tensors on ", device->ToString(),
            "; a layer must sit on one device"));
      }
    }
  }
  return device;
}

}  // namespace

absl::StatusOr<PipeCheckpoint> ParsePipeCheckpoint(std::string_view name) {
  if (name == "always") return PipeCheckpoint::kAlways;
  if (name == "except_last") return PipeCheckpoint::kExceptLast;
  if (name == "never") return PipeCheckpoint::kNever;
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint must be 'always', 'except_last' or 'never', "
                   "got '",
                   std::string(name), "'"));
}

std::string_view PipeCheckpointName(PipeCheckpoint mode) {
  switch (mode) {
    case PipeCheckpoint::kAlways:
      return "always";
    case PipeCheckpoint::kExceptLast:
      return "except_last";
    case PipeCheckpoint::kNever:
      return "never";
  }
  return "?";
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> GpipeClockCycles(
    int64_t micro_batches, int64_t stages) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> cycles;
  for (int64_t k = 0; k < micro_batches + stages - 1; ++k) {
    std::vector<std::pair<int64_t, int64_t>> cycle;
    for (int64_t j = std::max<int64_t>(1 + k - micro_batches, 0);
         j < std::min<int64_t>(1 + k, stages); ++j) {
      cycle.emplace_back(k - j, j);
    }
    cycles.push_back(std::move(cycle));
  }
  return cycles;
}

// One Forward's cells: in[i][j] is stage j's (detached) input for
// micro-batch i, out[i][j] its output (with the cell's graph unless the
// cell is checkpointed or grad mode was off).
struct Pipe::Run {
  int64_t micro_batches = 0;
  std::vector<bool> checkpointed;  // per micro-batch
  std::vector<std::vector<Tensor>> in, out;
  Device input_device;
  bool input_requires_grad = false;
};

absl::StatusOr<std::unique_ptr<Pipe>> Pipe::Create(
    std::unique_ptr<nn::Module> module, PipeOptions options) {
  if (module == nullptr) {
    return absl::InvalidArgumentError("Pipe: the module is null");
  }
  auto* seq = dynamic_cast<nn::Sequential*>(module.get());
  if (seq == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Pipe needs an nn::Sequential whose layers sit on their devices, got ",
        std::string(module->type_name()), "; wrap the layers in a Sequential"));
  }
  if (seq->size() == 0) {
    return absl::InvalidArgumentError("Pipe: the Sequential has no layers");
  }
  if (options.chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Pipe: chunks must be >= 1, got ", options.chunks));
  }
  // Each layer's device; a layer without tensors runs where the layer
  // before it runs (the first such layers where the first device is).
  std::vector<std::optional<Device>> devices;
  for (int64_t i = 0; i < seq->size(); ++i) {
    TANDEM_ASSIGN_OR_RETURN(std::optional<Device> d,
                            LayerDevice(*seq->at(i), i));
    devices.push_back(d);
  }
  std::optional<Device> current;
  for (const auto& d : devices) {
    if (d.has_value()) {
      current = d;
      break;
    }
  }
  if (!current.has_value()) {
    return absl::InvalidArgumentError(
        "Pipe: no layer has parameters or buffers, so no layer says which "
        "device it is on; move the layers to their devices first");
  }
  auto pipe = std::unique_ptr<Pipe>(new Pipe());
  pipe->options_ = options;
  for (int64_t i = 0; i < seq->size(); ++i) {
    if (devices[i].has_value()) current = devices[i];
    std::vector<Stage>& stages = pipe->stages_;
    if (!stages.empty() && stages.back().device == *current) {
      ++stages.back().num_layers;
      continue;
    }
    for (const Stage& s : stages) {
      if (s.device == *current) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Pipe: stages not in device order: layer ", i, " (",
            std::string(seq->at(i)->type_name()), ") is on ",
            current->ToString(), ", but layers ", s.first_layer, "..",
            s.first_layer + s.num_layers - 1, " on ", current->ToString(),
            " are followed by layers on ", stages.back().device.ToString(),
            "; each device's layers must be consecutive"));
      }
    }
    stages.push_back(Stage{*current, i, 1});
  }
  std::vector<Device> stage_devices;
  for (const Stage& s : pipe->stages_) stage_devices.push_back(s.device);
  TANDEM_ASSIGN_OR_RETURN(pipe->workers_,
                          DeviceWorkers::Create(std::move(stage_devices)));
  TANDEM_RETURN_IF_ERROR(
      pipe->RegisterModule("module", std::move(module)).status());
  pipe->module_ = seq;
  return pipe;
}

absl::StatusOr<Tensor> Pipe::RunStage(size_t j, const Tensor& x) const {
  Tensor h = x;
  const Stage& s = stages_[j];
  for (int64_t l = s.first_layer; l < s.first_layer + s.num_layers; ++l) {
    absl::StatusOr<Tensor> next = module_->at(l)->Forward(h);
    if (!next.ok()) {
      return absl::Status(next.status().code(),
                          absl::StrCat("layer ", l, " (",
                                       std::string(module_->at(l)->type_name()),
                                       "): ", next.status().message()));
    }
    h = std::move(next).value();
  }
  return h;
}

absl::Status Pipe::StageError(size_t j, int64_t micro_batch,
                              const Tensor& input,
                              const absl::Status& error) const {
  const Stage& s = stages_[j];
  return absl::Status(
      error.code(),
      absl::StrCat("Pipe stage ", j, " (", s.device.ToString(), ", layers ",
                   s.first_layer, "..", s.first_layer + s.num_layers - 1,
                   ") failed on micro-batch ", micro_batch, " with input ",
                   Describe(input),
                   j == 0 ? std::string(" (the batch's rows)")
                          : absl::StrCat(" (the output of stage ", j - 1, ")"),
                   ": ", error.message()));
}

absl::StatusOr<Tensor> Pipe::Forward(const Tensor& input) {
  if (!input.defined() || input.ndim() < 1 || input.dim(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Pipe needs a batch with at least one row along dim 0, got ",
        input.defined() ? Describe(input) : "an undefined tensor"));
  }
  if (options_.chunks > input.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Pipe: chunks (", options_.chunks, ") is larger than the batch (",
        input.dim(0), " rows); use chunks <= the batch size"));
  }
  const std::vector<Tensor> params = Parameters();
  std::vector<Tensor> node_inputs = {input};
  node_inputs.insert(node_inputs.end(), params.begin(), params.end());
  const bool grad = ShouldRecord(node_inputs);

  auto run = std::make_shared<Run>();
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> pieces,
                          ChunkRows(input.Detach(), options_.chunks));
  const int64_t m = static_cast<int64_t>(pieces.size());
  const size_t n = stages_.size();
  run->micro_batches = m;
  run->input_device = input.device();
  run->input_requires_grad = input.requires_grad();
  run->in.assign(m, std::vector<Tensor>(n));
  run->out.assign(m, std::vector<Tensor>(n));
  for (int64_t i = 0; i < m; ++i) {
    const bool ckpt =
        grad &&
        (options_.checkpoint == PipeCheckpoint::kAlways ||
         (options_.checkpoint == PipeCheckpoint::kExceptLast && i < m - 1));
    run->checkpointed.push_back(ckpt);
  }

  for (const auto& cycle : GpipeClockCycles(m, static_cast<int64_t>(n))) {
    std::vector<DeviceWorkers::Task> tasks(n);
    for (const auto& [i, j] : cycle) {
      tasks[j] = [this, run, &pieces, grad, i = i, j = j]() -> absl::Status {
        Run& r = *run;
        const Device device = stages_[j].device;
        const Tensor& src = j == 0 ? pieces[i] : r.out[i][j - 1];
        Tensor in;
        {
          NoGradGuard no_grad;  // the hand-over is a plain copy
          TANDEM_ASSIGN_OR_RETURN(in, CopyToDevice(src, device));
        }
        in = in.Detach();
        if (grad && (j > 0 || r.input_requires_grad) &&
            IsFloatingPoint(in.dtype())) {
          TANDEM_RETURN_IF_ERROR(in.set_requires_grad(true));
        }
        std::optional<NoGradGuard> no_grad;
        if (!grad || r.checkpointed[i]) no_grad.emplace();
        absl::StatusOr<Tensor> out = RunStage(j, in);
        if (!out.ok()) return StageError(j, i, in, out.status());
        r.in[i][j] = std::move(in);
        r.out[i][j] = std::move(out).value();
        // A checkpointed cell's output is needed only by the next stage.
        if (j > 0 && r.checkpointed[i]) r.out[i][j - 1] = Tensor();
        return absl::OkStatus();
      };
    }
    absl::Status ran = workers_->Run(std::move(tasks), options_.timeout);
    if (!ran.ok()) return ran;
  }

  std::vector<Tensor> last;
  for (int64_t i = 0; i < m; ++i) last.push_back(run->out[i][n - 1].Detach());
  Tensor output;
  {
    NoGradGuard no_grad;
    TANDEM_ASSIGN_OR_RETURN(output, GatherRows(last, stages_.back().device));
  }
  if (!grad) return output;
  for (int64_t i = 0; i < m; ++i) {
    if (run->checkpointed[i]) run->out[i][n - 1] = Tensor();  // recomputed
  }
  RecordOp("PipeBackward", output, std::move(node_inputs),
           [this, run](const Tensor& g, GradSink& sink) -> absl::Status {
             Tensor input_grad;
             TANDEM_RETURN_IF_ERROR(Backward(*run, g, input_grad));
             if (sink.needs(0) && input_grad.defined()) {
               return sink.Add(0, std::move(input_grad));
             }
             return absl::OkStatus();
           });
  return output;
}

absl::Status Pipe::Backward(Run& run, const Tensor& grad, Tensor& input_grad) {
  const int64_t m = run.micro_batches;
  const size_t n = stages_.size();
  TANDEM_ASSIGN_OR_RETURN(std::vector<Tensor> grad_pieces,
                          ChunkRows(grad, options_.chunks));
  // gin[i][j]: the gradient of stage j's input for micro-batch i.
  std::vector<std::vector<Tensor>> gin(m, std::vector<Tensor>(n));
  auto cycles = GpipeClockCycles(m, static_cast<int64_t>(n));
  for (auto it = cycles.rbegin(); it != cycles.rend(); ++it) {
    std::vector<DeviceWorkers::Task> tasks(n);
    for (const auto& [i, j] : *it) {
      tasks[j] = [this, &run, &gin, &grad_pieces, n, i = i,
                  j = j]() -> absl::Status {
        const Device device = stages_[j].device;
        Tensor gy;
        if (static_cast<size_t>(j) == n - 1) {
          TANDEM_ASSIGN_OR_RETURN(gy, grad_pieces[i].To(device));
        } else {
          if (!gin[i][j + 1].defined()) return absl::OkStatus();
          TANDEM_ASSIGN_OR_RETURN(gy, gin[i][j + 1].To(device));
        }
        EnableGradGuard enable_grad;  // the cell's graph, or its recompute
        Tensor& in = run.in[i][j];
        Tensor y = run.out[i][j];
        if (run.checkpointed[i]) {
          absl::StatusOr<Tensor> again = RunStage(j, in);
          if (!again.ok()) return StageError(j, i, in, again.status());
          y = std::move(again).value();
        }
        if (y.requires_grad()) TANDEM_RETURN_IF_ERROR(y.Backward(gy));
        if (in.requires_grad()) gin[i][j] = in.grad();
        run.out[i][j] = Tensor();  // release the cell
        in = Tensor();
        return absl::OkStatus();
      };
    }
    TANDEM_RETURN_IF_ERROR(workers_->Run(std::move(tasks), options_.timeout));
  }
  if (!run.input_requires_grad) return absl::OkStatus();
  std::vector<Tensor> pieces;
  for (int64_t i = 0; i < m; ++i) {
    if (!gin[i][0].defined()) return absl::OkStatus();
    pieces.push_back(gin[i][0]);
  }
  TANDEM_ASSIGN_OR_RETURN(input_grad, GatherRows(pieces, run.input_device));
  return absl::OkStatus();
}

}  // namespace tandem::train
