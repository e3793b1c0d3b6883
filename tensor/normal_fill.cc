#include "tensor/normal_fill.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// Every float operation below is rounded where written: this file is built
// with -ffp-contract=off (tensor/BUILD), and each fused multiply-add of
// PyTorch's build is an explicit std::fmaf. Checked against torch.randn for
// many seeds and sizes with no differing bit (generator_test pins some).

namespace tandem::internal {
namespace {

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kExponentBits = 0x7f800000u;

}  // namespace

float CephesLogf(float x) {
  const bool invalid = !(x > 0.0f);
  // Denormals are raised to the smallest normal float first.
  constexpr float kMinNormal = std::numeric_limits<float>::min();
  if (!(x > kMinNormal)) x = kMinNormal;
  // x = m * 2^k with m in [0.5, 1): e = k, then m moved to [sqrt(1/2),
  // sqrt(2)) around 1 and f = m - 1.
  const int32_t biased = static_cast<int32_t>(Bits(x) >> 23);
  float m = FromBits((Bits(x) & ~kExponentBits) | Bits(0.5f));
  float e = static_cast<float>(biased - 0x7f) + 1.0f;
  const bool below = m < 0.707106781186547524f;  // sqrt(1/2)
  const float extra = below ? m : 0.0f;
  float f = m - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  f = f + extra;  // below: 2m - 1, computed as (m - 1) + m
  const float f2 = f * f;
  // log(1 + f) = f - f^2/2 + f^3 * P(f), P of degree 8 (Horner, fused).
  float p = 7.0376836292e-2f;
  p = std::fmaf(p, f, -1.1514610310e-1f);
  p = std::fmaf(p, f, 1.1676998740e-1f);
  p = std::fmaf(p, f, -1.2420140846e-1f);
  p = std::fmaf(p, f, 1.4249322787e-1f);
  p = std::fmaf(p, f, -1.6668057665e-1f);
  p = std::fmaf(p, f, 2.0000714765e-1f);
  p = std::fmaf(p, f, -2.4999993993e-1f);
  p = std::fmaf(p, f, 3.3333331174e-1f);
  p = p * f;
  // + e * log(2), with log(2) split in a short high part and a low part.
  float r = std::fmaf(p, f2, e * -2.12194440e-4f);
  r = std::fmaf(-f2, 0.5f, r);
  r = std::fmaf(e, 0.693359375f, f + r);
  return invalid ? std::numeric_limits<float>::quiet_NaN() : r;
}

void CephesSinCosf(float x, float* sin_out, float* cos_out) {
  uint32_t sin_sign = Bits(x) & kSignBit;
  const float ax = FromBits(Bits(x) & ~kSignBit);
  // Octant j (rounded up to even) of |x|, and |x| - j * pi/4 in three steps
  // (pi/4 split so that the first two products are exact).
  int32_t j = static_cast<int32_t>(ax * 1.27323954473516f);  // 4/pi; trunc
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  float r = std::fmaf(y, -0.78515625f, ax);
  r = std::fmaf(y, -2.4187564849853515625e-4f, r);
  r = std::fmaf(y, -3.77489497744594108e-8f, r);
  sin_sign ^= static_cast<uint32_t>(j & 4) << 29;
  const uint32_t cos_sign = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  const bool sin_uses_sin_poly = (j & 2) == 0;

  const float z = r * r;
  // cos(r) ~ 1 - z/2 + z^2 * C(z)
  float c = std::fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f);
  c = std::fmaf(c, z, 4.166664568298827e-2f);
  c = c * z;
  c = std::fmaf(c, z, -(z * 0.5f));
  c = c + 1.0f;
  // sin(r) ~ r + r * z * S(z)
  float s = std::fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f);
  s = std::fmaf(s, z, -1.6666654611e-1f);
  s = s * z;
  s = std::fmaf(s, r, r);
  // The kernel selects with masks and adds a zero to each result; kept so
  // that a -0 comes out as PyTorch's does.
  const float sin_part = sin_uses_sin_poly ? s : 0.0f;
  const float cos_part = sin_uses_sin_poly ? 0.0f : c;
  const float sin_value = cos_part + sin_part;
  const float cos_value = (c - cos_part) + (s - sin_part);
  *sin_out = FromBits(Bits(sin_value) ^ sin_sign);
  *cos_out = FromBits(Bits(cos_value) ^ cos_sign);
}

void NormalFill16(float* data, float mean, float std) {
  // float(2 * pi) as PyTorch rounds it: 6.2831855f.
  const float two_pi = static_cast<float>(2.0 * 3.14159265358979323846);
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j];  // [0, 1) -> (0, 1] for the log
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * CephesLogf(u1));
    float sin_theta;
    float cos_theta;
    CephesSinCosf(two_pi * u2, &sin_theta, &cos_theta);
    data[j] = std::fmaf(radius * cos_theta, std, mean);
    data[j + 8] = std::fmaf(radius * sin_theta, std, mean);
  }
}

}  // namespace tandem::internal
