#include "bench/amp_measure.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/status_macros.h"
#include "bench/rank_memory.h"
#include "bench/repeat_timer.h"
#include "tensor/allocator.h"
#include "tensor/amp/autocast.h"
#include "tensor/ops.h"

namespace tandem::bench {
namespace {

// The built-in CPU allocator is put back however the measurement ends.
class AllocatorSwap {
 public:
  explicit AllocatorSwap(std::shared_ptr<Allocator> counting)
      : ok_(RegisterAllocator(DeviceType::kCPU, std::move(counting))) {}
  ~AllocatorSwap() {
    RegisterAllocator(DeviceType::kCPU, CpuAllocator()).IgnoreError();
  }
  const absl::Status& status() const { return ok_; }

 private:
  absl::Status ok_;
};

}  // namespace

double TimeBf16Gemms(const std::vector<Bf16Gemm>& shapes, double seconds) {
  int64_t max_a = 0, max_b = 0, max_c = 0;
  for (const Bf16Gemm& g : shapes) {
    max_a = std::max(max_a, g.shape.m * g.shape.k);
    max_b = std::max(max_b, g.shape.k * g.shape.n);
    max_c = std::max(max_c, g.shape.m * g.shape.n);
  }
  // 0.5 and 0.25 in bf16: finite sums whatever the shape.
  std::vector<uint16_t> a(max_a, 0x3f00), b(max_b, 0x3e80), c(max_c, 0);
  double flops = 0;
  for (const Bf16Gemm& g : shapes) {
    flops += 2.0 * g.shape.m * g.shape.n * g.shape.k * g.times;
  }
  auto once = [&] {
    for (const Bf16Gemm& g : shapes) {
      for (int64_t t = 0; t < g.times; ++t) {
        cpu::GemmBf16(g.shape, a.data(), b.data(), nullptr, c.data())
            .IgnoreError();  // valid shapes by construction
      }
    }
  };
  return flops * RepeatsPerSecond(once, seconds) / 1e9;
}

absl::StatusOr<StepMemory> MeasureStepMemory(nn::Module& model, const Tensor& x,
                                             const Tensor& y, bool bf16) {
  auto memory = std::make_shared<RankMemory>(/*max_ranks=*/1);
  AllocatorSwap swap(memory);
  TANDEM_RETURN_IF_ERROR(swap.status());
  RankMemory::ScopedRank scope(0);
  StepMemory result;
  for (int pass = 0; pass < 2; ++pass) {  // warm-up, then measured
    memory->ResetPeak(0);
    const int64_t before = memory->Stats(0).bytes_in_use;
    Tensor loss;
    {
      std::optional<amp::Autocast> autocast;
      if (bf16) autocast.emplace(DeviceType::kCPU, DType::kBF16);
      TANDEM_ASSIGN_OR_RETURN(Tensor logits, model.Forward(x));
      TANDEM_ASSIGN_OR_RETURN(loss, CrossEntropy(logits, y));
      result.cast_bytes = amp::CastCacheBytes();
      result.activation_bytes =
          memory->Stats(0).bytes_in_use - before - result.cast_bytes;
    }
    model.ZeroGrad();
    TANDEM_RETURN_IF_ERROR(loss.Backward());
    result.step_peak_bytes = memory->Stats(0).peak_bytes - before;
  }
  return result;
}

}  // namespace tandem::bench
