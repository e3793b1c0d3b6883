// What tandem's two AVX2 GEMM kernels (skinny_gemm.cc, packed_gemm.cc)
// share: the target attribute, the per-thread packing buffer and how a
// tile's sums meet C. Internal to tensor/cpu.
#ifndef TANDEM_TENSOR_CPU_AVX2_GEMM_COMMON_H_
#define TANDEM_TENSOR_CPU_AVX2_GEMM_COMMON_H_

#include <cstdint>
#include <vector>

// The kernels are compiled for AVX2 + FMA whatever the build targets and
// run only where HasSkinnyGemm() (skinny_gemm.h) says the CPU has both.
#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

namespace tandem::cpu::internal {

inline int64_t RoundUp(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// A packing buffer of at least `floats` floats, 64-byte aligned (a cache
// line), grown in `buffer` (the caller's thread_local) and kept.
inline float* Scratch(std::vector<float>& buffer, int64_t floats) {
  if (static_cast<int64_t>(buffer.size()) < floats + 16) {
    buffer.resize(static_cast<size_t>(floats + 16));
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t{63});
}

// How a tile's sums meet C: the first K block computes
// C = alpha * acc + beta * C (never reading C when beta == 0), later blocks
// add alpha * acc.
struct Update {
  float alpha;
  float beta;
  bool first;

  float Apply(float sum, float old) const {
    const float v = alpha * sum;
    if (!first) return old + v;
    return beta == 0.f ? v : beta * old + v;
  }
};

}  // namespace tandem::cpu::internal

#endif  // TANDEM_TENSOR_CPU_AVX2_GEMM_COMMON_H_
