#include "tensor/autocast_state.h"

#include <utility>

#include "base/fiber_local.h"
#include "base/status_macros.h"

namespace tandem::internal {
namespace {

// One slot per device type (kCPU, kCUDA): a CUDA region does not switch
// the CPU's autocast off, as in PyTorch, whose state is per device type.
constexpr int kNumDeviceTypes = 2;
thread_local AutocastState* current[kNumDeviceTypes] = {nullptr, nullptr};

// Autocast regions are a rank's: they follow it when ranks are fibers.
[[maybe_unused]] const bool kCpuAutocastIsFiberLocal =
    base::RegisterFiberLocal<AutocastState*>(
        []() -> AutocastState*& { return current[0]; }, nullptr);
[[maybe_unused]] const bool kCudaAutocastIsFiberLocal =
    base::RegisterFiberLocal<AutocastState*>(
        []() -> AutocastState*& { return current[1]; }, nullptr);

int Slot(DeviceType type) {
  const int i = static_cast<int>(type);
  return i >= 0 && i < kNumDeviceTypes ? i : 0;
}

bool IsLow(DType d) { return d == DType::kF16 || d == DType::kBF16; }

// Widest floating dtype of `inputs`: f64 > f32 > {bf16, f16}; bf16 with
// f16 gives f32 (PyTorch's promotion).
DType WidestFloat(const std::vector<Tensor>& inputs) {
  bool f64 = false, f32 = false, f16 = false, bf16 = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    switch (t.dtype()) {
      case DType::kF64:
        f64 = true;
        break;
      case DType::kF32:
        f32 = true;
        break;
      case DType::kF16:
        f16 = true;
        break;
      case DType::kBF16:
        bf16 = true;
        break;
      default:
        break;
    }
  }
  if (f64) return DType::kF64;
  if (f32 || (f16 && bf16)) return DType::kF32;
  return f16 ? DType::kF16 : DType::kBF16;
}

// Suspends every autocast region of this thread for its lifetime.
class Suspend {
 public:
  Suspend() {
    for (int i = 0; i < kNumDeviceTypes; ++i) {
      saved_[i] = std::exchange(current[i], nullptr);
    }
  }
  ~Suspend() {
    for (int i = 0; i < kNumDeviceTypes; ++i) current[i] = saved_[i];
  }
  Suspend(const Suspend&) = delete;
  Suspend& operator=(const Suspend&) = delete;

 private:
  AutocastState* saved_[kNumDeviceTypes];
};

absl::StatusOr<Tensor> RunInF32(AmpOp op, std::vector<Tensor> inputs,
                                Rerun rerun) {
  const DType result_dtype = WidestFloat(inputs);
  for (Tensor& t : inputs) {
    if (t.defined() && IsLow(t.dtype())) {
      TANDEM_ASSIGN_OR_RETURN(t, t.To(DType::kF32));
    }
  }
  Tensor out;
  {
    Suspend suspend;
    TANDEM_ASSIGN_OR_RETURN(out, rerun(inputs));
  }
  (void)op;
  if (IsFloatingPoint(out.dtype()) && out.dtype() != result_dtype) {
    return out.To(result_dtype);
  }
  return out;
}

}  // namespace

AutocastState* CurrentAutocast(DeviceType type) { return current[Slot(type)]; }

AutocastState* ExchangeAutocast(DeviceType type, AutocastState* state) {
  return std::exchange(current[Slot(type)], state);
}

bool HasNativeLowPrecisionKernel(AmpOp op, DType dtype, DeviceType device) {
  const bool gemm = op == AmpOp::kMatMul || op == AmpOp::kLinear;
  // CUDA: cublasGemmEx takes f16 and bf16 operands with f32 compute
  // (tensor/cuda/internal/gemm.h), so neither is widened first: no f32
  // copies of the operands, tensor cores where the GPU has them.
  if (device == DeviceType::kCUDA) {
    return gemm && (dtype == DType::kBF16 || dtype == DType::kF16);
  }
  // CPU: Conv2d in bf16 takes step 2 (f32 im2col + GEMM on the widened
  // inputs, output rounded to bf16): the same arithmetic as a bf16 kernel
  // with f32 accumulation, since bf16 products are exact in f32.
  if (dtype != DType::kBF16) return false;
  return gemm;
}

std::optional<absl::StatusOr<Tensor>> RouteLowPrecision(
    AmpOp op, std::initializer_list<Tensor> list, Rerun rerun) {
  DeviceType type = DeviceType::kCPU;
  bool any_low = false, any_other_float = false;
  DType low = DType::kBF16;
  for (const Tensor& t : list) {
    if (!t.defined()) continue;
    type = t.device().type();
    if (IsLow(t.dtype())) {
      if (any_low && t.dtype() != low) any_other_float = true;
      any_low = true;
      low = t.dtype();
    } else if (IsFloatingPoint(t.dtype())) {
      any_other_float = true;
    }
  }
  AutocastState* state = CurrentAutocast(type);
  if (state == nullptr && !any_low) return std::nullopt;
  std::vector<Tensor> inputs(list);
  if (state != nullptr) {
    absl::StatusOr<bool> changed = state->CastInputs(op, inputs);
    if (!changed.ok()) return absl::StatusOr<Tensor>(changed.status());
    if (*changed) return rerun(inputs);
  }
  if (!any_low) return std::nullopt;
  // Native low-precision kernels take one low dtype throughout.
  if (!any_other_float && HasNativeLowPrecisionKernel(op, low, type)) {
    return std::nullopt;
  }
  return RunInF32(op, std::move(inputs), rerun);
}

}  // namespace tandem::internal
