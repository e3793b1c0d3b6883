// The large MLP's GEMMs (batch 64, 1024-4096-4096-1024) one by one, each
// product through each candidate kernel, next to the 2048³ sgemm that
// ddp_large_mlp_vs_gemm_bound divides by. Part of tensor_benchmark (one
// binary, Google Benchmark's flags; rates are per CPU second of the
// calling thread, so other load on the machine slows them less than wall
// time would):
//
//   ./bazelw run --config=opt //bench:tensor_benchmark --
//       --benchmark_filter='GemmSquare|GemmStep|GemmXWt'   (one line)
//
// Products of a Linear layer (in -> out) at batch M = 64, row-major:
//   0 forward      y[M,out] = x[M,in]·W[out,in]ᵀ    (A·Bᵀ)
//   1 input grad   dx[M,in] = g[M,out]·W[out,in]     (A·B)
//   2 weight grad  dW[out,in] += g[M,out]ᵀ·x[M,in]  (Aᵀ·B, beta 1)
// Kernels:
//   0 OpenBLAS cblas_sgemm
//   1 oneDNN dnnl_sgemm
//   2 oneDNN's matmul primitive, created once and cached (plain layouts)
//   3 tandem's cpu::SkinnyGemmNt (forward only)
//   4 cpu::Gemm as tandem dispatches it (KernelChoice::kFastest); for the
//     forward, the Linear op itself (whatever layout it picks)
//   5 tandem's cpu::PackedGemm (every layout)
// GemmXWt: the forward at 4096 -> 4096 for batches 8 to 256 (which kernel
// wins where: cpu::UseSkinnyGemm's bounds).
// GemmGpt: the same three products at the GPT example's shapes (rows =
// batch 8 x block 256 = 2048; d_model 384: qkv 384 -> 1152, attention
// projection 384 -> 384, MLP 384 -> 1536 and 1536 -> 384, lm_head
// 384 -> 256), kernels 0, 1, 4 and 5:
//
//   ./bazelw run --config=opt //bench:tensor_benchmark --
//       --benchmark_filter='GemmSquare|GemmGpt'
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "tensor/autograd/autograd.h"
#include "tensor/cpu/blas.h"
#include "tensor/cpu/packed_gemm.h"
#include "tensor/cpu/skinny_gemm.h"
#include "tensor/ops.h"
#include "tensor/tensor.h"

namespace tandem {
namespace {

// One product: C[m,n] = op(A)·op(B) + beta C.
struct Product {
  bool ta, tb;
  int64_t m, n, k;
  float beta;
};

Product StepProduct(int64_t which, int64_t batch, int64_t in, int64_t out) {
  switch (which) {
    case 0:
      return {false, true, batch, out, in, 0.f};
    case 1:
      return {false, false, batch, in, out, 0.f};
    default:
      return {true, false, out, in, batch, 1.f};
  }
}

// oneDNN's matmul with plain row-major (or transposed) operands, created
// once: what a cached primitive costs per call.
class Matmul {
 public:
  explicit Matmul(const Product& p) {
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    a_ = dnnl::memory::desc({p.m, p.k}, dt::f32,
                            p.ta ? dims{1, p.m} : dims{p.k, 1});
    b_ = dnnl::memory::desc({p.k, p.n}, dt::f32,
                            p.tb ? dims{1, p.k} : dims{p.n, 1});
    c_ = dnnl::memory::desc({p.m, p.n}, dt::f32, dims{p.n, 1});
    dnnl::primitive_attr attr;
    if (p.beta != 0.f) {
      dnnl::post_ops ops;
      ops.append_sum(p.beta);
      attr.set_post_ops(ops);
    }
    prim_ = dnnl::matmul(dnnl::matmul::primitive_desc(
        dnnl::matmul::desc(a_, b_, c_), attr, engine_));
  }
  void Run(const float* a, const float* b, float* c) {
    dnnl::memory am(a_, engine_, const_cast<float*>(a));
    dnnl::memory bm(b_, engine_, const_cast<float*>(b));
    dnnl::memory cm(c_, engine_, c);
    prim_.execute(
        stream_,
        {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
  dnnl::memory::desc a_, b_, c_;
  dnnl::matmul prim_;
};

// oneDNN's OpenMP team on this thread as wide as the BLAS setting (one
// thread), as cpu::Gemm sizes it for each rank: a 1x1x1 product through
// GemmOneDnn (cpu::Gemm's own small A·B goes to OpenBLAS, which would leave
// OpenMP's machine-wide default in place).
void OneDnnOnOneThread() {
  float a = 1.f, b = 1.f, c = 0.f;
  cpu::GemmOneDnn<float>(false, false, 1, 1, 1, 1.f, &a, &b, 0.f, &c)
      .IgnoreError();
}

void RunProduct(benchmark::State& state, const Product& p, int64_t kernel) {
  std::vector<float> a(p.m * p.k), b(p.k * p.n), c(p.m * p.n, 0.f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i % 17) * 0.05f - 0.4f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = (i % 13) * 0.07f - 0.4f;
  const int lda = static_cast<int>(p.ta ? p.m : p.k);
  const int ldb = static_cast<int>(p.tb ? p.k : p.n);
  if (kernel == 5 && !cpu::HasSkinnyGemm()) {
    state.SkipWithError("PackedGemm runs on AVX2+FMA CPUs only");
    return;
  }
  if (kernel == 3 && !(!p.ta && p.tb && cpu::HasSkinnyGemm())) {
    state.SkipWithError("SkinnyGemmNt runs A·Bᵀ on AVX2+FMA CPUs only");
    return;
  }
  std::unique_ptr<Matmul> matmul;
  if (kernel == 2) matmul = std::make_unique<Matmul>(p);
  Tensor x, w;
  const bool linear = kernel == 4 && !p.ta && p.tb;
  if (linear) {  // x [m, k], W [n, k]
    x = Tensor::Full({p.m, p.k}, 0.5).value();
    w = Tensor::Full({p.n, p.k}, 0.25).value();
  }
  NoGradGuard no_grad;
  for (auto _ : state) {
    switch (kernel) {
      case 0:
        cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans,
                    p.tb ? CblasTrans : CblasNoTrans, static_cast<int>(p.m),
                    static_cast<int>(p.n), static_cast<int>(p.k), 1.f, a.data(),
                    lda, b.data(), ldb, p.beta, c.data(),
                    static_cast<int>(p.n));
        break;
      case 1:
        dnnl_sgemm(p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', p.m, p.n, p.k, 1.f,
                   a.data(), lda, b.data(), ldb, p.beta, c.data(), p.n);
        break;
      case 2:
        matmul->Run(a.data(), b.data(), c.data());
        break;
      case 3:
        cpu::SkinnyGemmNt(p.m, p.n, p.k, 1.f, a.data(), b.data(), p.beta,
                          c.data());
        break;
      case 5:
        cpu::PackedGemm(p.ta, p.tb, p.m, p.n, p.k, 1.f, a.data(), b.data(),
                        p.beta, c.data());
        break;
      default:
        if (linear) {
          benchmark::DoNotOptimize(Linear(x, w, Tensor()));
        } else {
          cpu::Gemm<float>(p.ta, p.tb, p.m, p.n, p.k, 1.f, a.data(), b.data(),
                           p.beta, c.data())
              .IgnoreError();
        }
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * p.m * p.n * p.k * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

// args: kernel (0 OpenBLAS, 1 dnnl_sgemm, 2 matmul primitive, 5 packed).
void BM_GemmSquare2048(benchmark::State& state) {
  OneDnnOnOneThread();
  RunProduct(state, {false, false, 2048, 2048, 2048, 0.f}, state.range(0));
}
BENCHMARK(BM_GemmSquare2048)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(5)
    ->Unit(benchmark::kMillisecond);

// args: product, in, out, kernel.
void BM_GemmStep(benchmark::State& state) {
  OneDnnOnOneThread();
  RunProduct(state,
             StepProduct(state.range(0), 64, state.range(1), state.range(2)),
             state.range(3));
}
BENCHMARK(BM_GemmStep)
    ->ArgsProduct({{0, 1, 2}, {1024, 4096}, {1024, 4096}, {0, 1, 2, 3, 4, 5}})
    ->Unit(benchmark::kMillisecond);

// args: batch, kernel (forward at 4096 -> 4096).
void BM_GemmXWt(benchmark::State& state) {
  OneDnnOnOneThread();
  RunProduct(state, StepProduct(0, state.range(0), 4096, 4096), state.range(1));
}
BENCHMARK(BM_GemmXWt)
    ->ArgsProduct({{8, 16, 32, 64, 128, 192, 256}, {0, 1, 3}})
    ->Unit(benchmark::kMillisecond);

// args: product, in, out, kernel; 2048 rows.
void BM_GemmGpt(benchmark::State& state) {
  OneDnnOnOneThread();
  RunProduct(state,
             StepProduct(state.range(0), 2048, state.range(1), state.range(2)),
             state.range(3));
}
BENCHMARK(BM_GemmGpt)
    ->ArgsProduct({{0, 1, 2}, {384}, {1152, 384, 1536, 256}, {0, 1, 4, 5}})
    ->ArgsProduct({{0, 1, 2}, {1536}, {384}, {0, 1, 4, 5}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tandem
