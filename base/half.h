// Conversions between f32 and the two 16-bit float formats: IEEE binary16
// ("f16") and bfloat16 ("bf16"), both stored as uint16_t. The one
// implementation every package uses (comm's reductions, tensor's Half and
// BFloat16), bit-exact with PyTorch's c10::Half and c10::BFloat16:
//   - f32 -> f16 and f32 -> bf16 round to nearest, ties to even; values
//     beyond the f16 range (|x| >= 65520) become +-inf; f16 subnormals are
//     produced and read exactly;
//   - NaN stays NaN: f32 -> f16 gives a quiet NaN that keeps the sign (0x7E00
//     / 0xFE00); f32 -> bf16 gives 0x7FC0 for every NaN, as c10 does;
//   - f16 -> f32 and bf16 -> f32 are exact (every 16-bit value is a float),
//     so "reduce in f32, round once" is a single *FromF32 call at the end.
//
//   uint16_t h = tandem::half::F16FromF32(0.1f);   // 0x2e66
//   float back = tandem::half::F32FromF16(h);       // 0.0999755859375f
//
// The f16 routines are the branch-light method of Maratyszcza's FP16 library
// (which c10::Half uses); they assume the default floating-point rounding
// mode. Header-only so that hot loops inline them; pure and thread-safe.
// (tensor/cuda/kernels/kernel_util.cuh has the device-side copy.)
#ifndef TANDEM_BASE_HALF_H_
#define TANDEM_BASE_HALF_H_

#include <bit>
#include <cstdint>

namespace tandem::half {

namespace internal {
inline uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
inline float FromBits(uint32_t u) { return std::bit_cast<float>(u); }
}  // namespace internal

inline float F32FromF16(uint16_t h) {
  using internal::Bits;
  using internal::FromBits;
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  // Normal numbers (and inf/NaN): shift the exponent and mantissa into f32
  // position, then rescale the exponent bias by a power of two (exact).
  const uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = FromBits((two_w >> 4) + exp_offset) * exp_scale;
  // Subnormals: build 0.5 + m * 2^-24 ... and subtract the 0.5 (exact).
  const uint32_t magic_mask = 126u << 23;
  const float magic_bias = 0.5f;
  const float denormalized = FromBits((two_w >> 17) | magic_mask) - magic_bias;
  const uint32_t denormalized_cutoff = 1u << 27;
  const uint32_t result =
      sign |
      (two_w < denormalized_cutoff ? Bits(denormalized) : Bits(normalized));
  return FromBits(result);
}

inline uint16_t F16FromF32(float f) {
  using internal::Bits;
  using internal::FromBits;
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  const uint32_t w = Bits(f);
  const float abs_f = FromBits(w & 0x7FFFFFFFu);
  // Overflow to infinity happens in the first product; the second brings the
  // value into the range where adding `bias` rounds at f16 precision.
  float base = (abs_f * scale_to_inf) * scale_to_zero;
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = FromBits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = Bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) |
                               (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float F32FromBF16(uint16_t b) {
  return internal::FromBits(static_cast<uint32_t>(b) << 16);
}

inline uint16_t BF16FromF32(float f) {
  const uint32_t w = internal::Bits(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;  // NaN, as c10 does
  // Round to nearest even on the low 16 bits; overflow carries into inf.
  const uint32_t rounding_bias = 0x7FFFu + ((w >> 16) & 1u);
  return static_cast<uint16_t>((w + rounding_bias) >> 16);
}

}  // namespace tandem::half

#endif  // TANDEM_BASE_HALF_H_
