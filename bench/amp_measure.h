// The mixed-precision measurements of bench/ddp_benchmark (and so of
// bench/compare's amp claims), kept apart from its timing loop:
//
//   - TimeBf16Gemms: GFLOP/s of one thread running cpu::GemmBf16 on a list
//     of shapes back to back (2048^3 alone is the machine's bf16 peak as
//     this build reaches it; the large MLP's shapes are the step's).
//   - MeasureStepMemory: what one training step (forward, loss, backward)
//     of a model allocates, f32 or under bf16 autocast, from the CPU
//     allocator's statistics (bench/rank_memory.h).
//
// Both run on the calling thread. MeasureStepMemory swaps the process's
// CPU allocator for a counting one while it runs and restores the built-in
// one afterwards: call it when no other thread allocates tensors (between
// timed cases), never concurrently with itself.
#ifndef TANDEM_BENCH_AMP_MEASURE_H_
#define TANDEM_BENCH_AMP_MEASURE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/nn/module.h"
#include "tensor/tensor.h"

namespace tandem::bench {

// One GEMM of a step, `times` times.
struct Bf16Gemm {
  cpu::GemmBf16Shape shape;
  int64_t times = 1;
};

// GFLOP/s of `shapes` run back to back for at least `seconds` (after one
// untimed pass) on this thread, through cpu::GemmBf16 with bf16 operands.
double TimeBf16Gemms(const std::vector<Bf16Gemm>& shapes, double seconds);

struct StepMemory {
  // Bytes allocated by the forward pass (model and loss) and still alive
  // when it ends, minus the parameter casts: the activations kept for
  // backward (and the loss), the peak of activation memory in a step.
  int64_t activation_bytes = 0;
  // The low-precision parameter copies (amp::CastCacheBytes at the end of
  // the forward pass); 0 in f32.
  int64_t cast_bytes = 0;
  // Peak bytes in use during forward + backward above what was in use
  // before the step (parameters, their gradients from the previous step
  // and the batch are not counted).
  int64_t step_peak_bytes = 0;
};

// One warm-up step, then the measured one: logits = model(x) (under
// amp::Autocast(kCPU, kBF16) when `bf16`), loss = CrossEntropy(logits, y),
// model.ZeroGrad(), loss.Backward(). Gradients are left in the model.
absl::StatusOr<StepMemory> MeasureStepMemory(nn::Module& model, const Tensor& x,
                                             const Tensor& y, bool bf16);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_AMP_MEASURE_H_
