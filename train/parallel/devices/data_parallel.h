// train/parallel/devices: one process, several devices (no communicator):
// DataParallel (this header: a replica per device), Pipe (pipe.h: GPipe
// over devices), the worker thread per device they run on
// (device_workers.h) and differentiable device transfers
// (device_transfer.h; the rank pipeline uses them too). docs/devices.md.
//
// DataParallel: one process, several devices, after torch.nn.DataParallel
// (PyTorch 1.13). Each Forward splits the batch along dim 0 over the devices
// (torch.chunk), replicates the module's parameters and buffers onto each
// device (connected to autograd), runs the replicas concurrently, one worker
// thread per device, and gathers the outputs on the output device. Backward
// through the gathered output sums every replica's gradient onto the
// original parameters (the replication's backward is a reduce-add).
//
//   TANDEM_RETURN_IF_ERROR(model->To(Device::Sim(0)));
//   TANDEM_ASSIGN_OR_RETURN(
//       auto dp, train::DataParallel::Create(
//                    std::move(model), make_model,
//                    {.device_ids = {Device::Sim(0), Device::Sim(1)}}));
//   TANDEM_ASSIGN_OR_RETURN(Tensor y, dp->Forward(x));    // y on sim:0
//   TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mse(y, target)); // target on sim:0
//   TANDEM_RETURN_IF_ERROR(loss.Backward());  // grads summed on sim:0
//   TANDEM_RETURN_IF_ERROR(sgd.Step());       // sgd over dp->Parameters()
//
// How it differs from PyTorch, and why:
//   - Modules cannot be copied here (they own their layers and are not
//     copyable), so Create takes a factory that builds a module of the same
//     architecture; Create builds one replica per device with it, once, and
//     checks that the replicas' parameter and buffer names, shapes and
//     dtypes equal the module's. Every Forward then points the replicas'
//     parameters at fresh copies of the module's (tensor/replicate.h) and
//     copies the buffers in, as PyTorch's replicate() does.
//   - The backward of the whole batch runs on the thread that calls
//     Backward (PyTorch runs each device's part on its own thread); the
//     forward is the concurrent part.
//   - One tensor in, one tensor out (the Module interface); a single device
//     runs the module directly, as PyTorch does.
//
// Determinism: the replication and the scatter happen on the calling thread
// before the replicas start, so the order in which backward adds the
// replicas' gradients is fixed: same seed, same weights on any schedule.
//
// Contract: the module's parameters and buffers must sit on device_ids[0]
// (checked at every Forward, PyTorch's message). Backward each Forward's
// result before the next Forward (the replicas are re-pointed each time).
// Errors are Status values: empty device list, a device that does not exist,
// duplicate devices, a replica that differs from the module, an empty or
// 0-d batch, the first replica's error with its device named, a replica
// that outlives DataParallelOptions::timeout. A DataParallel belongs to one
// thread (its replicas run on its workers only inside Forward).
#ifndef TANDEM_TRAIN_PARALLEL_DEVICES_DATA_PARALLEL_H_
#define TANDEM_TRAIN_PARALLEL_DEVICES_DATA_PARALLEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tensor/device.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"
#include "train/parallel/devices/device_workers.h"

namespace tandem::train {

struct DataParallelOptions {
  // The devices, in scatter order; at least one, no repeats. The module
  // lives on device_ids[0].
  std::vector<Device> device_ids = {};
  // Where the outputs are gathered; device_ids[0] when unset.
  std::optional<Device> output_device = std::nullopt;
  // Bounds each Forward's wait for its replicas.
  absl::Duration timeout = absl::Minutes(5);
};

class DataParallel : public nn::Module {
 public:
  using ReplicaFactory =
      std::function<absl::StatusOr<std::unique_ptr<nn::Module>>()>;

  // Takes ownership of `module` (registered as the child "module", so the
  // state dict names are PyTorch's "module.<name>").
  static absl::StatusOr<std::unique_ptr<DataParallel>> Create(
      std::unique_ptr<nn::Module> module, ReplicaFactory make_replica,
      DataParallelOptions options);

  absl::StatusOr<Tensor> Forward(const Tensor& input) override;
  std::string_view type_name() const override { return "DataParallel"; }

  nn::Module& module() const { return *module_; }
  const std::vector<Device>& device_ids() const { return devices_; }
  Device output_device() const { return output_device_; }
  // How many replicas the last Forward ran (fewer than the devices when the
  // batch has fewer rows than chunks allow, e.g. 5 rows on 4 devices: 3).
  int64_t last_replica_count() const { return last_replica_count_; }

 private:
  DataParallel() = default;
  absl::Status CheckModuleDevice() const;

  nn::Module* module_ = nullptr;  // owned by the Module base (child)
  std::vector<Device> devices_;
  Device output_device_;
  absl::Duration timeout_;
  std::vector<std::unique_ptr<nn::Module>> replicas_;  // one per device
  std::unique_ptr<DeviceWorkers> workers_;
  int64_t last_replica_count_ = 0;
};

}  // namespace tandem::train

#endif  // TANDEM_TRAIN_PARALLEL_DEVICES_DATA_PARALLEL_H_
