#include "tensor/cpu/pytorch_math/sleef_mathf.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tandem::internal {
namespace {

int32_t Bits(float x) { return std::bit_cast<int32_t>(x); }
float FromBits(int32_t u) { return std::bit_cast<float>(u); }

// 2^q for q in the normal exponent range, built from its bits.
float Pow2(int32_t q) { return FromBits((q + 0x7f) << 23); }

// A float kept as an unevaluated sum hi + lo (SLEEF's "double-float").
struct Pair {
  float hi;
  float lo;
};

// x + y with the rounding error of the sum in lo (any magnitudes).
Pair TwoSum(float x, float y) {
  const float s = x + y;
  const float v = s - x;
  return {s, (x - (s - v)) + (y - v)};
}

// (a.hi, a.lo) + (b.hi, b.lo), assuming |a| >= |b|.
Pair AddPairs(Pair a, Pair b) {
  const float s = a.hi + b.hi;
  return {s, (((a.hi - s) + b.hi) + a.lo) + b.lo};
}

// (a.hi, a.lo) + b, assuming |a| >= |b|.
Pair AddFloat(Pair a, float b) {
  const float s = a.hi + b;
  return {s, ((a.hi - s) + b) + a.lo};
}

// (a.hi, a.lo) * b with the product's error from fused multiply-adds.
Pair MulFloat(Pair a, float b) {
  const float p = a.hi * b;
  return {p, std::fmaf(a.lo, b, std::fmaf(a.hi, b, -p))};
}

// n / d in double-float, as SLEEF's FMA variant: one reciprocal, then
// corrections.
Pair Divide(Pair n, Pair d) {
  const float t = 1.0f / d.hi;
  const float q = n.hi * t;
  const float u = std::fmaf(t, n.hi, -q);
  float lo = std::fmaf(-d.lo, t, std::fmaf(-d.hi, t, 1.0f));
  lo = std::fmaf(q, lo, std::fmaf(n.lo, t, u));
  return {q, lo};
}

}  // namespace

float SleefExpf(float x) {
  constexpr float kInvLn2 =
      1.442695040888963407359924681001892137426645954152985934135449406931f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.428606765330187045e-06f;
  // q = round-half-even(x / ln 2), s = x - q ln 2 in two fused steps.
  const float qf = std::nearbyint(x * kInvLn2);
  const int32_t q = static_cast<int32_t>(qf);
  float s = std::fmaf(qf, -kLn2Hi, x);
  s = std::fmaf(qf, -kLn2Lo, s);
  float u = 0.000198527617612853646278381f;
  u = std::fmaf(u, s, 0.00139304355252534151077271f);
  u = std::fmaf(u, s, 0.00833336077630519866943359f);
  u = std::fmaf(u, s, 0.0416664853692054748535156f);
  u = std::fmaf(u, s, 0.166666671633720397949219f);
  u = std::fmaf(u, s, 0.5f);
  u = 1.0f + std::fmaf(s * s, u, s);
  // u * 2^q in two halves so that neither factor overflows.
  u = u * Pow2(q >> 1) * Pow2(q - (q >> 1));
  if (x < -104.0f) u = 0.0f;
  if (100.0f < x) u = std::numeric_limits<float>::infinity();
  if (std::isnan(x)) u = x;
  return u;
}

float SleefLogf(float d) {
  const float in = d;
  // Subnormals are scaled up by 2^64 first.
  const bool tiny = d < std::numeric_limits<float>::min();
  if (tiny)
    d = d * (static_cast<float>(INT64_C(1) << 32) *
             static_cast<float>(INT64_C(1) << 32));
  // d = m * 2^e with m in [0.75, 1.5).
  int32_t e = ((Bits(d * (1.0f / 0.75f)) >> 23) & 0xff) - 0x7f;
  const float m = FromBits(Bits(d) + ((-e) << 23));
  if (tiny) e -= 64;
  const float ef = static_cast<float>(e);
  // s = e * ln 2 (ln 2 as a pair), x = (m - 1) / (m + 1).
  Pair s = MulFloat({0.69314718246459960938f, -1.904654323148236017e-09f}, ef);
  const Pair x = Divide(TwoSum(-1.0f, m), TwoSum(1.0f, m));
  const float x2 = x.hi * x.hi;
  float t = 0.3027294874e+0f;
  t = std::fmaf(t, x2, 0.3996108174e+0f);
  t = std::fmaf(t, x2, 0.6666694880e+0f);
  // ln m = 2x + 2x^3/3 + ...: s += 2x, then the odd series' tail.
  s = AddPairs(s, {x.hi * 2.0f, x.lo * 2.0f});
  s = AddFloat(s, x2 * x.hi * t);
  float r = s.hi + s.lo;
  if (std::isinf(in) && in > 0) r = std::numeric_limits<float>::infinity();
  if (in < 0.0f || std::isnan(in)) {
    r = std::numeric_limits<float>::quiet_NaN();
  }
  if (in == 0.0f) r = -std::numeric_limits<float>::infinity();
  return r;
}

}  // namespace tandem::internal
