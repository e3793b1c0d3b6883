// Conversions between f32 and the two 16-bit float formats comm moves:
// IEEE binary16 ("f16") and bfloat16 ("bf16"), both stored as uint16_t.
//
// Rounding is to nearest, ties to even; NaN stays NaN (quiet), infinities stay
// infinite, values beyond the f16 range round to infinity, f16 subnormals are
// produced and read exactly. Every f16 and bf16 value converts to f32 exactly,
// so "reduce in f32, round once" is a single call of the *FromF32 function at
// the end.
//
//   uint16_t h = comm::F16FromF32(0.1f);   // 0x2e66
//   float back = comm::F32FromF16(h);       // 0.0999755859375f
//
// The f16 routines are the branch-light method of Maratyszcza's FP16 library
// (also used by PyTorch's c10::Half); they assume the default floating-point
// rounding mode. All functions are pure and thread-safe.
#ifndef TANDEM_COMM_HALF_H_
#define TANDEM_COMM_HALF_H_

#include <cstdint>
#include <cstring>

namespace tandem::comm {

namespace half_internal {
inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
}  // namespace half_internal

inline float F32FromF16(uint16_t h) {
  using half_internal::Bits;
  using half_internal::FromBits;
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
  using half_internal::Bits;
  using half_internal::FromBits;
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
  return half_internal::FromBits(static_cast<uint32_t>(b) << 16);
}

inline uint16_t BF16FromF32(float f) {
  const uint32_t w = half_internal::Bits(f);
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) {
    // NaN: keep the sign, return a quiet NaN (truncation could give inf).
    return static_cast<uint16_t>((w >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7FFFu + ((w >> 16) & 1u);
  return static_cast<uint16_t>((w + rounding_bias) >> 16);
}

}  // namespace tandem::comm

#endif  // TANDEM_COMM_HALF_H_
