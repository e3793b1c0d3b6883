// The f32 CPU kernels of ScaledDotProductAttention on AVX2 + FMA
// (tensor/ops_attention.cc dispatches here when AttentionAvx2Usable).
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
// kernels in ops_attention.cc by float GEMM rounding (about sqrt(K) ulps
// of the largest term), not more.
//
// Memory: forward keeps no [T, T] buffer beyond the probabilities the op
// saves for backward; both directions hold a few [kAttentionRowBlock, T]
// float blocks of scratch, reused block to block and head to head.
//
// Shapes as in tensor/attention_kernels.h: q, k, v, y, gy, gq, gk, gv
// [bh, t, hd]; probs and mask [bh, t, t], all contiguous; mask may be null.
//
// Thread-safety: pure functions on caller-owned memory; each call allocates
// its own scratch. Errors are cpu::Gemm's (a dimension beyond BLAS's int).
#ifndef TANDEM_TENSOR_ATTENTION_AVX2_H_
#define TANDEM_TENSOR_ATTENTION_AVX2_H_

#include <cstdint>

#include "absl/status/status.h"

namespace tandem::internal {

// Query rows per GEMM block: with T = 256, four blocks, and the causal
// product computes 10 of 16 [64, 64] tiles.
inline constexpr int64_t kAttentionRowBlock = 64;

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

}  // namespace tandem::internal

#endif  // TANDEM_TENSOR_ATTENTION_AVX2_H_
