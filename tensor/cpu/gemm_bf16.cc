#include "tensor/cpu/gemm_bf16.h"

#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/math_tally.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/onednn_threads.h"

namespace tandem::cpu {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // (ta, tb, m, n, k, accumulate, bias) -> primitive. Training repeats a
  // handful of shapes, so this stays small.
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, bool, bool>,
           dnnl::matmul>
      cache;
};

Context& ThreadContext() {
  thread_local Context context;
  return context;
}

dnnl::memory::desc Desc(int64_t rows, int64_t cols, bool transposed) {
  // Logical [rows, cols]; stored [cols, rows] when transposed.
  return dnnl::memory::desc({rows, cols}, dt::bf16,
                            transposed ? dims{1, rows} : dims{cols, 1});
}

float F32(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as base/half.h (NaN keeps a quiet bit).
uint16_t Bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  }
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The same arithmetic without a bf16 kernel (a processor without AVX-512,
// where oneDNN 2.6 has no bf16 matmul): bf16 products are exact in f32, so
// widening the operands and running the f32 GEMM accumulates in f32 exactly
// as the bf16 kernel does; the result is rounded once. Slower, not wrong.
absl::Status GemmViaF32(const GemmBf16Shape& s, const uint16_t* a,
                        const uint16_t* b, const uint16_t* bias, uint16_t* c) {
  thread_local std::vector<float> fa, fb, fc;
  fa.resize(static_cast<size_t>(s.m * s.k));
  fb.resize(static_cast<size_t>(s.k * s.n));
  fc.resize(static_cast<size_t>(s.m * s.n));
  for (size_t i = 0; i < fa.size(); ++i) fa[i] = F32(a[i]);
  for (size_t i = 0; i < fb.size(); ++i) fb[i] = F32(b[i]);
  for (int64_t r = 0; r < s.m; ++r) {
    for (int64_t j = 0; j < s.n; ++j) {
      float v = bias != nullptr ? F32(bias[j]) : 0.f;
      if (s.accumulate) v += F32(c[r * s.n + j]);
      fc[r * s.n + j] = v;
    }
  }
  const bool beta = bias != nullptr || s.accumulate;
  absl::Status status =
      Gemm<float>(s.transpose_a, s.transpose_b, s.m, s.n, s.k, 1.f, fa.data(),
                  fb.data(), beta ? 1.f : 0.f, fc.data());
  if (!status.ok()) return status;
  for (size_t i = 0; i < fc.size(); ++i) c[i] = Bf16(fc[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status GemmBf16(const GemmBf16Shape& s, const uint16_t* a,
                      const uint16_t* b, const uint16_t* bias, uint16_t* c) {
  if (s.m < 0 || s.n < 0 || s.k < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GemmBf16: negative dimension M=", s.m, " N=", s.n, " K=", s.k));
  }
  if (s.m == 0 || s.n == 0) return absl::OkStatus();
  base::ScopedMathKernel tally;  // the network clock's FLOP-bound share
  if (s.k == 0 || !HasNativeBf16Gemm()) return GemmViaF32(s, a, b, bias, c);
  ApplyBlasThreadsToOneDnn();
  Context& ctx = ThreadContext();
  const bool has_bias = bias != nullptr;
  const dnnl::memory::desc a_md = Desc(s.m, s.k, s.transpose_a);
  const dnnl::memory::desc b_md = Desc(s.k, s.n, s.transpose_b);
  const dnnl::memory::desc c_md = Desc(s.m, s.n, false);
  const dnnl::memory::desc bias_md({1, s.n}, dt::bf16, dims{s.n, 1});
  try {
    const auto key = std::make_tuple(s.transpose_a, s.transpose_b, s.m, s.n,
                                     s.k, s.accumulate, has_bias);
    auto it = ctx.cache.find(key);
    if (it == ctx.cache.end()) {
      dnnl::primitive_attr attr;
      if (s.accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.f);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::desc desc =
          has_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                   : dnnl::matmul::desc(a_md, b_md, c_md);
      const dnnl::matmul::primitive_desc pd(desc, attr, ctx.engine);
      it = ctx.cache.emplace(key, dnnl::matmul(pd)).first;
    }
    dnnl::memory a_mem(a_md, ctx.engine, const_cast<uint16_t*>(a));
    dnnl::memory b_mem(b_md, ctx.engine, const_cast<uint16_t*>(b));
    dnnl::memory c_mem(c_md, ctx.engine, c);
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, a_mem},
                                                  {DNNL_ARG_WEIGHTS, b_mem},
                                                  {DNNL_ARG_DST, c_mem}};
    if (has_bias) {
      args.emplace(DNNL_ARG_BIAS, dnnl::memory(bias_md, ctx.engine,
                                               const_cast<uint16_t*>(bias)));
    }
    it->second.execute(ctx.stream, args);
    ctx.stream.wait();
  } catch (const dnnl::error& e) {
    return absl::InternalError(absl::StrCat(
        "GemmBf16: oneDNN refused the bf16 matmul M=", s.m, " N=", s.n, " K=",
        s.k, ": ", e.what(), " (status ", static_cast<int>(e.status), ")"));
  }
  return absl::OkStatus();
}

}  // namespace tandem::cpu

namespace tandem::cpu {

bool HasNativeBf16Gemm() {
  // Asked once per process: can oneDNN build a bf16 matmul here?
  static const bool native = [] {
    try {
      dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const dnnl::memory::desc md({2, 2}, dt::bf16, dims{2, 1});
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md, md, md), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return native;
}

}  // namespace tandem::cpu
