// Internal: the hook through which the ops consult mixed precision at
// dispatch, and the rule that runs f32-only kernels on f16/bf16 inputs.
//
// tensor/amp/ owns autocast (the region, its ONE op-policy table and the
// cast cache); the ops in tensor/ops/ only know this interface, so the
// tensor core does not depend on tensor/amp. Every op that takes floating
// inputs starts, after device dispatch, with
//
//   if (auto routed = internal::RouteLowPrecision(
//           AmpOp::kRelu, {x}, [](const std::vector<Tensor>& in) {
//             return Relu(in[0]);
//           })) {
//     return *std::move(routed);
//   }
//
// which does, in order:
//   1. Autocast: when this thread has an enabled region for the inputs'
//      device type, the region casts the inputs by its policy for `op`; if
//      any input changed, the op is re-run on the cast inputs (whose casts
//      are differentiable, so gradients reach the originals in their dtype).
//   2. Low-precision fallback: when an input is f16/bf16 and the device has
//      no native kernel for `op` in that dtype (Linear/MatMul in bf16 on the
//      CPU through oneDNN, in f16 and bf16 on CUDA through cuBLAS; see
//      HasNativeLowPrecisionKernel), the op runs on f32 copies of its
//      floating inputs with autocast suspended and its floating result is
//      rounded to the widest input dtype (bf16 with f16 gives f32), as
//      PyTorch's CPU kernels compute f16/bf16 in float and round the result.
// Neither step applies to f32/f64-only inputs outside autocast: then the op
// runs as called, at no cost beyond a thread-local read.
//
// Thread-safety: the current region is thread-local (the simulated
// cluster's ranks are threads: one rank's region never reaches another).
#ifndef TANDEM_TENSOR_AUTOCAST_STATE_H_
#define TANDEM_TENSOR_AUTOCAST_STATE_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "tensor/device.h"
#include "tensor/tensor.h"

namespace tandem {

// The ops that autocast has a policy for (tensor/amp/policy.cc maps each to
// a cast policy).
enum class AmpOp : int8_t {
  kMatMul,
  kLinear,
  kConv2d,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kUnary,  // Neg, Relu, Sigmoid, Tanh, Exp, Log and the scalar forms
  kMaxPool2d,
  kSoftmax,
  kLogSoftmax,
  kSum,
  kMean,
  kCrossEntropy,
  kMse,
};
inline constexpr int kNumAmpOps = static_cast<int>(AmpOp::kMse) + 1;

namespace internal {

// An autocast region as the ops see it (implemented by amp::Autocast).
class AutocastState {
 public:
  virtual ~AutocastState() = default;
  // Casts `inputs` in place by this region's policy for `op`; returns
  // whether any input changed. Undefined and non-floating inputs are left
  // alone. Errors come from the casts (allocation).
  virtual absl::StatusOr<bool> CastInputs(AmpOp op,
                                          std::vector<Tensor>& inputs) = 0;
};

// This thread's innermost region for `type`, or nullptr (none, or the
// innermost one is disabled).
AutocastState* CurrentAutocast(DeviceType type);
// Installs `state` (may be nullptr: autocast off) as this thread's region
// for `type`; returns the one it replaces, which the caller restores.
AutocastState* ExchangeAutocast(DeviceType type, AutocastState* state);

using Rerun =
    absl::FunctionRef<absl::StatusOr<Tensor>(const std::vector<Tensor>&)>;

// Steps 1 and 2 above. nullopt: run the op as called.
std::optional<absl::StatusOr<Tensor>> RouteLowPrecision(
    AmpOp op, std::initializer_list<Tensor> inputs, Rerun rerun);

// True when `device` has a native kernel for `op` in `dtype` (step 2
// skips): on the CPU bf16 MatMul/Linear (oneDNN); on CUDA f16 and bf16
// MatMul/Linear (cublasGemmEx with 16-bit operands and f32 compute).
bool HasNativeLowPrecisionKernel(AmpOp op, DType dtype,
                                 DeviceType device = DeviceType::kCPU);

}  // namespace internal
}  // namespace tandem

#endif  // TANDEM_TENSOR_AUTOCAST_STATE_H_
