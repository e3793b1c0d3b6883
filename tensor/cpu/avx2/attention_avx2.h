// The f32 CPU kernels of ScaledDotProductAttention on AVX2 + FMA
// (tensor/ops/attention.cc dispatches here when AttentionAvx2Usable).
//
// The products go through cpu::Gemm in f32, as PyTorch's bmm: per (batch,
// head) the query rows are cut into blocks of kAttentionRowBlock rows, and
// a block of rows [i0, i1) is multiplied with keys [0, i1) only when
// causal (the tiles above the diagonal are never computed: at T = 256, 10
// of the 16 tiles). The softmax is taken row by row on the block's scores
// in double (AVX2 exp) and rounded once to float, PyTorch's order of
// roundings otherwise: scores = float(q k^T) * float(scale), probabilities
// = float(softmax), A = probs * mask in float. Backward forms
// dS = probs * (dA * mask - rowsum(probs * dA * mask)) * scale in double per
// element and rounds it to float for the GEMMs gq = dS k, gk = dS^T q,
// gv = A^T gy. Results therefore differ from the double-summing portable
// kernels in tensor/ops/attention.cc by float GEMM rounding (about sqrt(K) ulps
// of the largest term), not more.
//
// Memory: forward keeps no [T, T] buffer beyond the probabilities the op
// saves for backward; both directions hold a few [kAttentionRowBlock, T]
// float blocks of scratch, reused block to block and head to head.
//
// Shapes as in tensor/dispatch/attention_kernels.h: q, k, v, y, gy, gq, gk, gv
// [bh, t, hd]; probs and mask [bh, t, t], all contiguous; mask may be null.
// The *Strided forms read and write the [t, hd] heads through a HeadLayout
// instead (CausalSelfAttentionQkv: heads in place in a fused QKV
// projection, no permuted copies).
//
// Thread-safety: pure functions on caller-owned memory; each call allocates
// its own scratch. Errors are cpu::Gemm's (a dimension beyond BLAS's int).
#ifndef TANDEM_TENSOR_CPU_AVX2_ATTENTION_AVX2_H_
#define TANDEM_TENSOR_CPU_AVX2_ATTENTION_AVX2_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tandem::internal {

// Query rows per GEMM block: with T = 256, four blocks, and the causal
// product computes 10 of 16 [64, 64] tiles.
inline constexpr int64_t kAttentionRowBlock = 64;

// Where the rows of head h in [0, bh) live in a q/k/v/y (or gradient)
// buffer: head h is (batch h / n_head, head h % n_head), starting at
// (h / n_head) * batch_stride + (h % n_head) * head_stride, its t rows of
// hd floats row_stride apart. Contiguous [bh, t, hd] is {1, t * hd, 0, hd};
// a fused QKV projection [B, T, 3, H, hd] read in place is, for q,
// {H, T * 3C, hd, 3C} (k and v: the same from base + C and + 2C), and
// y [B, T, H, hd] is {H, T * C, hd, C}.
struct HeadLayout {
  int64_t n_head = 1;
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t row_stride = 0;

  static HeadLayout Contiguous(int64_t t, int64_t hd) {
    return HeadLayout{1, t * hd, 0, hd};
  }
  int64_t Offset(int64_t h) const {
    return (h / n_head) * batch_stride + (h % n_head) * head_stride;
  }
};

// True when this CPU runs AVX2 and FMA (asked once) and hd > 0; false sends
// the caller to the portable kernels.
bool AttentionAvx2Usable(int64_t hd);

// probs = softmax(scale * q k^T, causal: probs[i, j] = 0 for j > i);
// y = (probs * mask) v. row_block (>= 1) is the query rows per GEMM block:
// the op passes kAttentionRowBlock, bench/attention_blocks sweeps it.
absl::Status AttentionForwardAvx2(const float* q, const float* k,
                                  const float* v, const float* mask, int64_t bh,
                                  int64_t t, int64_t hd, bool causal,
                                  double scale, float* probs, float* y,
                                  int64_t row_block = kAttentionRowBlock);

// The backward of the above (attention_kernels.h's formula); gq, gk, gv
// overwritten.
absl::Status AttentionBackwardAvx2(const float* gy, const float* q,
                                   const float* k, const float* v,
                                   const float* probs, const float* mask,
                                   int64_t bh, int64_t t, int64_t hd,
                                   bool causal, double scale, float* gq,
                                   float* gk, float* gv,
                                   int64_t row_block = kAttentionRowBlock);

// The same two kernels on strided heads (the same arithmetic: q k^T and
// gy v^T on each head gathered into a contiguous [t, hd] scratch, which
// keeps tandem's skinny A·Bᵀ kernel; the other GEMMs read and write
// through leading dimensions, cpu::GemmStrided): q, k, v
// and gq, gk, gv are laid out by `in`, y and gy by `out`; probs and mask
// stay contiguous [bh, t, t]. Rows of different heads must not overlap
// where they are written (y; gq, gk, gv).
absl::Status AttentionForwardAvx2Strided(
    const float* q, const float* k, const float* v, const HeadLayout& in,
    const float* mask, int64_t bh, int64_t t, int64_t hd, bool causal,
    double scale, float* probs, float* y, const HeadLayout& out,
    int64_t row_block = kAttentionRowBlock);
absl::Status AttentionBackwardAvx2Strided(
    const float* gy, const HeadLayout& out, const float* q, const float* k,
    const float* v, const HeadLayout& in, const float* probs, const float* mask,
    int64_t bh, int64_t t, int64_t hd, bool causal, double scale, float* gq,
    float* gk, float* gv, int64_t row_block = kAttentionRowBlock);

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_CPU_AVX2_ATTENTION_AVX2_H_
