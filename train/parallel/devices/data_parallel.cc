#include "train/parallel/devices/data_parallel.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tensor/autograd/autograd.h"
#include "tensor/replicate.h"
#include "train/parallel/devices/device_transfer.h"

namespace tandem::train {
namespace {

std::string Describe(const Tensor& t) {
  return absl::StrCat(DTypeName(t.dtype()), ShapeToString(t.shape()));
}

// Same names, shapes and dtypes, in the same order.
absl::Status CheckSameLayout(const char* kind,
                             const std::vector<nn::NamedTensor>& want,
                             const std::vector<nn::NamedTensor>& got,
                             Device device) {
  if (want.size() != got.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataParallel: the replica for ", device.ToString(), " has ",
        got.size(), " ", kind, " but the module has ", want.size(),
        "; the factory must build the module's architecture"));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& a = want[i].tensor;
    const Tensor& b = got[i].tensor;
    if (want[i].name != got[i].name || a.shape() != b.shape() ||
        a.dtype() != b.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DataParallel: the replica for ", device.ToString(), " has ", kind,
          " '", got[i].name, "' ", Describe(b), " where the module has '",
          want[i].name, "' ", Describe(a),
          "; the factory must build the module's architecture"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::Create(
    std::unique_ptr<nn::Module> module, ReplicaFactory make_replica,
    DataParallelOptions options) {
  if (module == nullptr || make_replica == nullptr) {
    return absl::InvalidArgumentError(
        "DataParallel: pass a module and a factory for its replicas");
  }
  if (options.device_ids.empty()) {
    return absl::InvalidArgumentError(
        "DataParallel: device_ids is empty; name at least one device");
  }
  for (size_t i = 0; i < options.device_ids.size(); ++i) {
    const Device d = options.device_ids[i];
    for (size_t j = 0; j < i; ++j) {
      if (options.device_ids[j] == d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DataParallel: device_ids[", j, "] and device_ids[", i,
            "] are both ", d.ToString(), "; list each device once"));
      }
    }
    // The one question every device type answers: can it hold memory?
    absl::Status usable = Tensor::Empty({1}, DType::kF32, d).status();
    if (!usable.ok()) {
      return absl::Status(
          usable.code(),
          absl::StrCat("DataParallel: device_ids[", i, "] = ", d.ToString(),
                       " cannot be used: ", usable.message()));
    }
  }
  auto dp = std::unique_ptr<DataParallel>(new DataParallel());
  dp->devices_ = options.device_ids;
  dp->output_device_ = options.output_device.value_or(dp->devices_[0]);
  dp->timeout_ = options.timeout;
  const std::vector<nn::NamedTensor> params = module->NamedParameters();
  const std::vector<nn::NamedTensor> buffers = module->NamedBuffers();
  for (const Device d : dp->devices_) {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<nn::Module> replica,
                            make_replica());
    if (replica == nullptr) {
      return absl::InvalidArgumentError(
          "DataParallel: the replica factory returned null");
    }
    TANDEM_RETURN_IF_ERROR(
        CheckSameLayout("parameters", params, replica->NamedParameters(), d));
    TANDEM_RETURN_IF_ERROR(
        CheckSameLayout("buffers", buffers, replica->NamedBuffers(), d));
    TANDEM_RETURN_IF_ERROR(replica->To(d));
    dp->replicas_.push_back(std::move(replica));
  }
  TANDEM_ASSIGN_OR_RETURN(dp->workers_, DeviceWorkers::Create(dp->devices_));
  TANDEM_ASSIGN_OR_RETURN(dp->module_,
                          dp->RegisterModule("module", std::move(module)));
  return dp;
}

absl::Status DataParallel::CheckModuleDevice() const {
  const Device home = devices_[0];
  for (const auto& list :
       {module_->NamedParameters(), module_->NamedBuffers()}) {
    for (const nn::NamedTensor& t : list) {
      if (t.tensor.device() != home) {
        return absl::FailedPreconditionError(absl::StrCat(
            "module must have its parameters and buffers on device ",
            home.ToString(),
            " (device_ids[0]) but found one of them on "
            "device: ",
            t.tensor.device().ToString(), " ('", t.name, "'); call module->To(",
            home.ToString(), ") first"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> DataParallel::Forward(const Tensor& input) {
  TANDEM_RETURN_IF_ERROR(CheckModuleDevice());
  if (!input.defined() || input.ndim() < 1 || input.dim(0) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataParallel needs a batch with at least one row along dim 0, got ",
        input.defined() ? Describe(input) : "an undefined tensor"));
  }
  if (devices_.size() == 1) {  // PyTorch's single-device path
    last_replica_count_ = 1;
    TANDEM_ASSIGN_OR_RETURN(Tensor x, CopyToDevice(input, devices_[0]));
    TANDEM_ASSIGN_OR_RETURN(Tensor y, module_->Forward(x));
    return CopyToDevice(y, output_device_);
  }
  // Scatter, then replicate, on this thread: the autograd nodes they record
  // are older than every replica's, which fixes the order of backward's
  // reduce-add (see the header).
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<Tensor> pieces,
      ChunkRows(input, static_cast<int64_t>(devices_.size())));
  const size_t n = pieces.size();
  last_replica_count_ = static_cast<int64_t>(n);
  std::vector<Tensor> inputs(n);
  for (size_t i = 0; i < n; ++i) {
    TANDEM_ASSIGN_OR_RETURN(inputs[i], CopyToDevice(pieces[i], devices_[i]));
  }
  const std::vector<Tensor> params = module_->Parameters();
  const std::vector<Tensor> buffers = module_->Buffers();
  for (size_t i = 0; i < n; ++i) {
    nn::Module& replica = *replicas_[i];
    replica.Train(module_->is_training());
    const std::vector<Tensor> rp = replica.Parameters();
    for (size_t p = 0; p < params.size(); ++p) {
      TANDEM_RETURN_IF_ERROR(ReplicateInto(params[p], rp[p]));
    }
    const std::vector<Tensor> rb = replica.Buffers();
    for (size_t b = 0; b < buffers.size(); ++b) {
      TANDEM_RETURN_IF_ERROR(rb[b].CopyFrom(buffers[b]));
    }
  }
  const bool grad = IsGradEnabled();
  std::vector<Tensor> outputs(n);
  std::vector<DeviceWorkers::Task> tasks(n);
  for (size_t i = 0; i < n; ++i) {
    tasks[i] = [this, i, grad, &inputs, &outputs]() -> absl::Status {
      std::optional<NoGradGuard> no_grad;
      if (!grad) no_grad.emplace();
      absl::StatusOr<Tensor> y = replicas_[i]->Forward(inputs[i]);
      if (!y.ok()) return y.status();
      outputs[i] = std::move(y).value();
      return absl::OkStatus();
    };
  }
  absl::Status ran = workers_->Run(std::move(tasks), timeout_);
  if (!ran.ok()) {
    return absl::Status(ran.code(),
                        absl::StrCat("DataParallel replica ", ran.message()));
  }
  return GatherRows(outputs, output_device_);
}

}  // namespace tandem::train
