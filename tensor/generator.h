// tandem::Generator — a random number generator that reproduces PyTorch's CPU
// generator bit for bit (see docs/pytorch_compat.md).
//
// PyTorch's CPU generator is a 32-bit Mersenne Twister seeded exactly like
// std::mt19937(uint32_t(seed)); randperm, uniform_ and the weight initialisers
// are thin recipes on top of its 32-bit outputs. Generator reproduces those
// recipes, so the same seed gives the same shuffles and the same initial
// weights as a PyTorch script:
//
//   tandem::Generator gen(/*seed=*/0);
//   std::vector<int64_t> perm = gen.Randperm(10);
//   // perm == {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, like
//   // torch.manual_seed(0); torch.randperm(10)
//
//   std::vector<float> w(60);
//   gen.ManualSeed(123);
//   gen.Uniform(w.data(), 60, -0.5f, 0.5f);   // ==
//   torch.empty(60).uniform_(-0.5, 0.5)
//
// There is deliberately no process-wide default generator: whoever needs
// randomness (a module's initialiser, a sampler, a data loader) takes a
// Generator& and draws from it, so the order of draws is visible in the code
// and two ranks simulated as threads in one process never share state.
//
// Thread-safety: a Generator is a plain value. Concurrent calls on one
// Generator race; give each thread its own (copies are independent and
// continue the same stream from the copied state).
#ifndef TANDEM_TENSOR_GENERATOR_H_
#define TANDEM_TENSOR_GENERATOR_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tandem {

class Generator {
 public:
  // PyTorch's default seed (c10::default_rng_seed_val), the state of
  // torch's global generator before any manual_seed call.
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;

  explicit Generator(uint64_t seed = kDefaultSeed);

  // Copyable: a copy continues the same stream independently.
  Generator(const Generator&) = default;
  Generator& operator=(const Generator&) = default;

  // Restarts the stream like torch.manual_seed(seed) (or
  // torch.Generator().manual_seed(seed)): only the low 32 bits feed the
  // Mersenne Twister; InitialSeed() reports the full value.
  void ManualSeed(uint64_t seed);
  uint64_t InitialSeed() const { return initial_seed_; }

  // The whole state as text (the seed, the Mersenne Twister's 624 words and
  // position, the cached normal sample), for checkpoints: a generator given
  // it by SetState continues the same stream bit for bit. Portable across
  // builds (std::mt19937's textual form is fixed by the C++ standard).
  std::string State() const;
  // Restores a State() result. InvalidArgument when `state` is not one;
  // the generator is then unchanged.
  absl::Status SetState(const std::string& state);

  // One 32-bit output of the Mersenne Twister (PyTorch's random()).
  uint32_t Random();
  // Two outputs: (first << 32) | second (PyTorch's random64()).
  uint64_t Random64();

  // A permutation of 0..n-1 identical to torch.randperm(n, generator=g) on
  // CPU: starting from the identity, for i in [0, n-2] draw
  // z = Random() % (n - i) (Random64() for n >= 2^32 / 20, as PyTorch does)
  // and swap r[i] with r[i + z]. Consumes n - 1 draws. n <= 0 gives an empty
  // vector and draws nothing.
  std::vector<int64_t> Randperm(int64_t n);

  // Fills out[0..n) like tensor.uniform_(from, to) on a contiguous float32
  // tensor: each element takes one Random() output v, then
  //   x = double(v & (2^24 - 1)) / 2^24,
  //   out = float(fma(x, double(to - from), double(from))),
  // where `to - from` is a float subtraction (as in ATen's uniform_real) and
  // the multiply-add is fused, as in PyTorch's x86-64 (AVX2) kernels.
  // Values lie in [from, to]. n <= 0 does nothing.
  void Uniform(float* out, int64_t n, float from, float to);

  // Fills out[0..n) like tensor.uniform_(from, to) on a float64 tensor: one
  // Random64() per element: x = double(v & (2^53 - 1)) / 2^53, then
  // fma(x, to - from, from).
  void Uniform(double* out, int64_t n, double from, double to);

  // Fills out[0..n) with normal samples N(mean, std^2) exactly as
  // tensor.normal_(mean, std) (and torch.randn) fills a contiguous float32
  // tensor on an x86-64 CPU with AVX2, bit for bit:
  // - n >= 16: n uniforms (as Uniform(out, n, 0, 1)), then Box-Muller on
  //   each block of 16 with PyTorch's AVX2 Cephes log/sin/cos
  //   (internal::NormalFill16, tensor/normal_fill.h); when n % 16 != 0 the
  //   last 16 are drawn afresh and transformed again;
  // - n < 16: the double-precision Box-Muller (two Random64() per pair,
  //   log(1 - u), the C library's sin/cos), the second sample of a pair cached
  //   for the next call, each value fma(sample, std, mean) rounded to float.
  // (PyTorch without AVX2, or built for AVX-512, takes a scalar path with
  // the C library's log/sin/cos instead; its values differ in the last bits.)
  void Normal(float* out, int64_t n, float mean, float std);

  // The same for a contiguous float64 tensor, as PyTorch does it on every
  // CPU: n >= 16: Uniform(out, n, 0, 1) (53-bit uniforms), then Box-Muller
  // on blocks of 16 with the C library's log/cos/sin in double and
  // fma(radius * cos, std, mean) (the tail of 16 redrawn as above); n < 16:
  // the cached double path, fma(sample, std, mean).
  void Normal(double* out, int64_t n, double mean, double std);

 private:
  double NextDoubleNormal();

  std::mt19937 engine_;
  uint64_t initial_seed_;
  // The second Box-Muller sample of the double path, like PyTorch's
  // next_double_normal_sample_. Cleared by ManualSeed.
  std::optional<double> next_double_normal_;
};

}  // namespace tandem

#endif  // TANDEM_TENSOR_GENERATOR_H_
