// Automatic mixed precision: PyTorch's `with torch.autocast(...)` as an
// RAII region.
//
//   {
//     amp::Autocast autocast(DeviceType::kCPU, DType::kBF16);
//     TANDEM_RETURN_IF_ERROR(autocast.status());
//     TANDEM_ASSIGN_OR_RETURN(Tensor y, model.Forward(x));  // bf16 GEMMs
//     TANDEM_ASSIGN_OR_RETURN(Tensor loss, Mse(y, target));  // f32
//   }
//   TANDEM_RETURN_IF_ERROR(loss.Backward());  // f32 grads on f32 params
//
// Inside an enabled region the ops cast their inputs by the policy table
// (tensor/amp/policy.h): Linear/MatMul/Conv2d run in the region's dtype
// with f32 accumulation, losses/softmax/reductions in f32, the rest in the
// widest input dtype. Casts are ordinary differentiable ops, so the f32
// master parameters receive f32 gradients.
//
// Cast cache: the low-precision copy of an f32 leaf that requires grad (a
// parameter) is made once and reused until the outermost region of this
// thread ends (PyTorch's cast cache): a weight used by several ops, or in
// several forward passes within one region, is cast once. Update
// parameters OUTSIDE the region (as PyTorch requires), since the cached
// copy does not see in-place changes.
//
// Regions nest: the innermost one decides; `Autocast(type, dtype,
// /*enabled=*/false)` inside a region is the guard that turns autocast off
// until it ends. Regions are per device type (a CUDA region does not change
// the CPU's) and per thread: the simulated cluster's ranks are threads, and
// one rank's region never reaches another.
//
// Valid dtypes: bf16 and f16 on the CPU (bf16 through oneDNN's bf16
// kernels; f16 correct but slower: computed in f32 and rounded) and on
// CUDA. Anything else leaves the region inert with status() an
// InvalidArgument naming the device and dtype.
//
// Thread-safety: a region belongs to the thread that made it and must be
// destroyed on it, innermost first (automatic with scoped objects).
#ifndef TANDEM_TENSOR_AMP_AUTOCAST_H_
#define TANDEM_TENSOR_AMP_AUTOCAST_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "tensor/autocast_state.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem::amp {

class Autocast final : public internal::AutocastState {
 public:
  Autocast(DeviceType device, DType dtype, bool enabled = true);
  ~Autocast() override;
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

  // OK, or why the region is inert (bad device/dtype).
  const absl::Status& status() const { return status_; }
  bool enabled() const { return enabled_ && status_.ok(); }
  DType dtype() const { return dtype_; }

  // OK when `dtype` is an autocast dtype for `device`; InvalidArgument
  // naming both otherwise.
  static absl::Status Check(DeviceType device, DType dtype);

  // internal::AutocastState: the policy table applied to `inputs`.
  absl::StatusOr<bool> CastInputs(AmpOp op,
                                  std::vector<Tensor>& inputs) override;

 private:
  DeviceType device_;
  DType dtype_;
  bool enabled_;
  absl::Status status_;
  bool installed_ = false;
  internal::AutocastState* previous_ = nullptr;
};

// Whether an enabled region for `device` is active on this thread.
bool IsAutocastEnabled(DeviceType device);
// Entries in this thread's cast cache (for tests: cleared when the
// outermost region ends).
int64_t CastCacheSize();
// Bytes of the low-precision copies in this thread's cast cache: the
// parameter casts, which memory accounting keeps apart from activations
// (bench/ddp_benchmark's activation figure subtracts them).
int64_t CastCacheBytes();

}  // namespace tandem::amp

#endif  // TANDEM_TENSOR_AMP_AUTOCAST_H_
